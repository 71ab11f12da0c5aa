#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kwd::watch {

// What the machine still knows, after the fact, of a kernel and watchdog that died together:
// the platform's part of watch/flight_end.hpp (Linux: the memory cgroup's OOM-kill counter
// and the kernel log; elsewhere nothing yet).

// Where the kernel's memory is charged, as a flight record keeps it.
struct CgroupMark {
  std::string dir;
  std::uint64_t inode = 0;
  int version = 0;
  std::optional<std::int64_t> oom_kills;
};
CgroupMark mark_memory_cgroup(pid_t kernel_pid);
// The counter now; nullopt when the cgroup is gone (a container's, removed with it; another
// directory at that path, as a restarted container's under a cgroup namespace) or has none.
std::optional<std::int64_t> cgroup_oom_kills(const std::string& dir, std::uint64_t inode,
                                             int version);

// This process's pid namespace (the inode of /proc/self/ns/pid); 0 where there is none.
std::uint64_t own_pid_namespace();

// The OOM killer's kills of `pids` that the kernel log still holds, from `since_wall_ms` on.
struct LoggedKill {
  pid_t pid = -1;
  std::int64_t at_ms = 0;  // wall clock
  std::optional<std::int64_t> rss_bytes;
};
struct KernelLogKills {
  bool readable = false;  // false: no kernel log (another platform, no permission, a container)
  std::string why_not;
  std::vector<LoggedKill> kills;
};
KernelLogKills oom_kills_in_kernel_log(const std::vector<pid_t>& pids, std::int64_t since_wall_ms);

}  // namespace kwd::watch
