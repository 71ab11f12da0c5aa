#pragma once

#include <string>

namespace kwd::daemon {

// The daemon competes for the CPU with the kernels it watches. When fifty of them start at
// once on two cores, a daemon at their priority gets its fair share, a fiftieth, and each
// wake-up waits in the run queue: new kernels were found 200-500 ms late (daemon_bench). At
// nice -10 the same stampede is found within 60 ms (p99). The daemon asks for that where it
// may (root, CAP_SYS_NICE, or as far as RLIMIT_NICE allows) and carries on as it is where it
// may not. Call before any thread starts: on Linux the nice value is a thread's, and new
// threads take their creator's.
// Returns what it got, as one line for the log.
std::string raise_scheduling_priority(int nice);

}  // namespace kwd::daemon
