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

// Every such process of the current user, found by a scan of the process table (Linux:
// /proc; one implementation per platform folder). A few ms for a few hundred processes.
std::vector<KernelProcess> find_kernel_processes();

// The same, scan after scan, at the cost of listing the table: a process is examined (its
// owner, command line, parent) in the first scans that see it, and afterwards its verdict
// is remembered for as long as its pid stays in the table. (A child is seen between fork and
// exec with its parent's command line; a few scans later it has exec'd for good. A kernel
// that a long-lived process exec's into later is still found by its connection file.)
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
};

}  // namespace kwd::daemon
