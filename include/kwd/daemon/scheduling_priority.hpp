#pragma once

#include <string>

namespace kwd::daemon {

// The daemon competes for the CPU with the kernels it watches. When fifty of them start at
// once on two cores, a daemon at their priority gets its fair share, a fiftieth, and each
// wake-up waits in the run queue: new kernels were found 200-500 ms late (daemon_bench). At
// nice -10, its session's too where that counts (below), the same stampede is found within
// 12-61 ms (p99, six runs). The daemon asks for that where it may (root, CAP_SYS_NICE, or as far as
// RLIMIT_NICE allows) and carries on as it is where it may not. Call before any thread
// starts: on Linux the nice value is a thread's, and new threads take their creator's.
// Returns what it got, as one line for the log.
std::string raise_scheduling_priority(int nice);

// Where the scheduler shares the CPU between sessions before it looks at nice values (Linux's
// autogroup: each session started by setsid, as jupyter_client starts every kernel, weighs as
// much as any other), a nice value counts only among the daemon's own session. When `wanted`
// asks for a higher priority and the daemon got one, this gives its session that nice value
// too (never a less favourable one than it has), if it leads the session (a service does; a
// daemon started from a shell would raise the shell's whole session, so it does not).
// Autogroup applies only to processes in the root cpu cgroup: where a cpu controller groups
// the daemon (CPUWeight= in a unit), the cgroup's weight decides, and this changes nothing.
// Returns what it did or why not, as one line for the log; empty where the platform has no
// such grouping, it is off, or no higher priority was asked for or granted.
std::string raise_session_priority(int wanted);

}  // namespace kwd::daemon
