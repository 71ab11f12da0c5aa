// Unbuilt here (see README.md): written to <libproc.h> as documented.
#include "kwd/probes/process_identity.hpp"

#include <libproc.h>

#include "kwd/probes/process_record.hpp"

namespace kwd::probes {

ProcessIdentity identify_process(pid_t pid) {
  ProcessIdentity id;
  char path[PROC_PIDPATHINFO_MAXSIZE];
  if (proc_pidpath(pid, path, sizeof path) > 0) id.command_line = path;
  if (const auto record = ProcessRecord::open(pid)) identify_kernel(*record, id);
  return id;
}

}  // namespace kwd::probes
