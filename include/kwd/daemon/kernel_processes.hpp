#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace kwd::daemon {

// A running process of ours whose command line names a kernel connection file
// (`-f FILE` and the other spellings of protocol::find_connection_file).
struct KernelProcess {
  pid_t pid = -1;
  std::string connection_file;   // absolute (a relative one is resolved against its cwd)
  std::uint64_t start_time = 0;  // distinguishes a reused pid
  // Started by `kernel-watchdog run` or `smoke` (its parent), or that launcher itself: it
  // is watched already.
  bool under_launcher = false;
  std::vector<std::string> argv;
};

// Every such process of the current user, found by scans of the process table (Linux: /proc;
// one implementation per platform folder), for less than examining every process each time: a
// process is examined (owner, command line, parent) in the first three scans that see it, then in
// one scan of every five (a fifth of the table each scan), its verdict remembered in between for as
// long as its pid stays in the table; one found to be a kernel is not examined again. A child seen
// between fork and exec, or a shell that exec's into the kernel after activating an environment,
// is found within five scans of it.
class KernelProcessScanner {
 public:
  std::vector<KernelProcess> scan();

 private:
  struct Seen {
    int scans = 0;
    bool kernel = false;
    KernelProcess process;  // when kernel
  };
  std::unordered_map<pid_t, Seen> seen_;
  std::uint64_t scans_ = 0;
};

}  // namespace kwd::daemon
