#include "kwd/watch/flight_evidence.hpp"

// macOS keeps no memory cgroup, and its jetsam kills are not read yet: a kernel and watchdog
// that died together are reported from their record alone.

namespace kwd::watch {

CgroupMark mark_memory_cgroup(pid_t) {
  return {};
}

std::optional<std::int64_t> cgroup_oom_kills(const std::string&, std::uint64_t, int) {
  return std::nullopt;
}

std::uint64_t own_pid_namespace() {
  return 0;
}

KernelLogKills oom_kills_in_kernel_log(const std::vector<pid_t>&, std::int64_t) {
  KernelLogKills out;
  out.why_not = "the system log's jetsam records are not read on macOS";
  return out;
}

}  // namespace kwd::watch
