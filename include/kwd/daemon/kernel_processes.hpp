#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
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

}  // namespace kwd::daemon
