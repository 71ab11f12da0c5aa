#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kwd::platform::linux_cgroup {

// The kernel must be charged to its cgroup from its first allocation: a process moved in
// after it started keeps its earlier pages charged where they were (v2 never moves
// charges). So the watchdog does not spawn the kernel directly but a tiny step of itself,
//   kernel-watchdog __enter-cgroup CGROUP_PROCS -- KERNEL_ARGV...
// which writes its own pid to CGROUP_PROCS and then execs the kernel: same pid, same
// parent, same process group, stdio and environment; by the time the kernel's first
// instruction runs, it is inside. (clone3's CLONE_INTO_CGROUP does the same without the
// step, but only on v2; this works on v1 too.)
inline constexpr std::string_view kEnterCgroupVerb = "__enter-cgroup";

// The step's argv for a kernel argv.
std::vector<std::string> enter_cgroup_argv(const std::string& self_exe,
                                           const std::string& procs_file,
                                           const std::vector<std::string>& kernel_argv);

// The step itself, called from main() with the whole argv; returns only on failure, with
// the status the shell would give (127: not found, 126: cannot execute). If the cgroup
// cannot be entered the kernel still starts, unlimited, and says so on stderr (fail open).
int enter_cgroup_and_exec(int argc, char** argv);

}  // namespace kwd::platform::linux_cgroup
