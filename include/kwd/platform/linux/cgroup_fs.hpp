#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kwd::platform::linux_proc {

// Where cgroup hierarchies are mounted, from /proc/PID/mountinfo.
struct CgroupMount {
  std::string root;         // the hierarchy path mounted there (usually "/")
  std::string mount_point;  // e.g. /sys/fs/cgroup or /sys/fs/cgroup/memory
};
struct CgroupMounts {
  std::optional<CgroupMount> v1_memory;  // a v1 hierarchy carrying the memory controller
  std::optional<CgroupMount> v2;         // the unified hierarchy
};
CgroupMounts parse_cgroup_mounts(std::string_view mountinfo);
// Those of this process's mount namespace (PROC_ROOT/self/mountinfo), parsed again only when
// the mount table has changed since the last call; nullopt if it cannot be read.
std::optional<CgroupMounts> cgroup_mounts(const std::string& proc_root = "/proc");

// A process's place in those hierarchies, from /proc/PID/cgroup.
struct CgroupMembership {
  std::optional<std::string> v1_memory;  // "N:...memory...:/path"
  std::optional<std::string> v2;         // "0::/path"
};
CgroupMembership parse_proc_cgroup(std::string_view text);

// The on-disk directory of hierarchy `path` under `mount`; nullopt when the path is not
// below what is mounted there (another cgroup namespace).
std::optional<std::string> cgroup_dir(const CgroupMount& mount, std::string_view path);

// The memory cgroup that charges a process: v2 when the unified hierarchy carries the
// memory controller for it, else v1's memory hierarchy.
struct MemoryCgroup {
  int version = 0;      // 1 or 2
  std::string path;     // hierarchy path, as /proc/PID/cgroup says it
  std::string dir;      // its directory
  std::string top_dir;  // the mount point: ancestors are walked up to here, not beyond
};
std::optional<MemoryCgroup> memory_cgroup_of(pid_t pid, const std::string& proc_root = "/proc");
// The same for a cgroup directory we know already (one the watchdog made).
std::optional<MemoryCgroup> memory_cgroup_at(const std::string& dir,
                                             const std::string& proc_root = "/proc");
// The directories whose memory limit caps the cgroup: its own, then each ancestor's up to the
// mount point (the limit in force is the tightest of them).
std::vector<std::string> limiting_dirs(const MemoryCgroup& cgroup);
// The v2 directory of a process, whatever controllers v2 carries (for memory.pressure on
// hybrid systems, where v1 charges memory but v2 still accounts pressure).
std::optional<std::string> unified_dir_of(pid_t pid, const std::string& proc_root = "/proc");

// "key value" lines (memory.events, memory.oom_control, memory.stat).
std::map<std::string, std::int64_t> parse_flat_keyed(std::string_view text);
// memory.max / memory.limit_in_bytes: nullopt for "max" and for v1's "unlimited" (the page
// counter's maximum, rounded down to a page).
std::optional<std::int64_t> parse_memory_limit(std::string_view text);
// A plain number file (memory.current, memory.usage_in_bytes).
std::optional<std::int64_t> parse_number(std::string_view text);

}  // namespace kwd::platform::linux_proc
