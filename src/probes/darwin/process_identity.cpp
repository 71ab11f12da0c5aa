// Unbuilt here (see README.md): written to <libproc.h> as documented.
#include "kwd/probes/process_identity.hpp"

#include <libproc.h>

namespace kwd::probes {

ProcessIdentity identify_process(pid_t pid) {
  ProcessIdentity id;
  char path[PROC_PIDPATHINFO_MAXSIZE];
  if (proc_pidpath(pid, path, sizeof path) > 0) id.command_line = path;
  return id;
}

// Another process's environment is in KERN_PROCARGS2, which needs more care than an
// unbuilt file should take on: not read on macOS yet.
std::string environment_variable(pid_t, std::string_view) {
  return "";
}

}  // namespace kwd::probes
