#include "kwd/platform/memory_room.hpp"

#include <unistd.h>

#include <algorithm>

#include "kwd/platform/linux/cgroup_fs.hpp"
#include "kwd/platform/linux/procfs.hpp"

namespace kwd::platform {
namespace {

// The cgroup's ceiling (the tightest along its path up to the mount) and what it holds that
// reclaim cannot give back: its usage less the page cache not recently used.
std::optional<MemoryRoom> cgroup_room() {
  const auto cgroup = linux_proc::memory_cgroup_of(::getpid());
  if (!cgroup) return std::nullopt;
  const bool v2 = cgroup->version == 2;
  const char* limit_name = v2 ? "memory.max" : "memory.limit_in_bytes";
  std::optional<std::int64_t> limit;
  std::string limit_dir;
  for (const auto& dir : linux_proc::limiting_dirs(*cgroup))
    if (const auto text = linux_proc::read_small_file(dir + "/" + limit_name))
      if (const auto found = linux_proc::parse_memory_limit(*text);
          found && (!limit || *found < *limit)) {
        limit = found;
        limit_dir = dir;
      }
  if (!limit) return std::nullopt;
  const auto usage_text = linux_proc::read_small_file(
      cgroup->dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes"));
  const auto usage = usage_text ? linux_proc::parse_number(*usage_text) : std::nullopt;
  if (!usage) return std::nullopt;
  std::int64_t reclaimable = 0;
  if (const auto stat = linux_proc::read_small_file(cgroup->dir + "/memory.stat")) {
    const auto fields = linux_proc::parse_flat_keyed(*stat);
    const auto found = fields.find(v2 ? "inactive_file" : "total_inactive_file");
    if (found != fields.end()) reclaimable = found->second;
  }
  MemoryRoom room;
  room.limit = *limit;
  room.in_use = std::max<std::int64_t>(*usage - reclaimable, 0);
  room.source = "the memory cgroup " + limit_dir + " (" + limit_name + ")";
  return room;
}

}  // namespace

std::optional<MemoryRoom> memory_room(std::string& problem) {
  const auto meminfo = linux_proc::read_small_file("/proc/meminfo");
  const auto total = meminfo ? linux_proc::find_kb_field(*meminfo, "MemTotal") : std::nullopt;
  const auto available =
      meminfo ? linux_proc::find_kb_field(*meminfo, "MemAvailable") : std::nullopt;
  std::optional<MemoryRoom> machine;
  if (total && available)
    machine = MemoryRoom{*total, *total - *available, "the machine's available memory"};
  const auto cgroup = cgroup_room();
  if (cgroup && (!machine || cgroup->limit - cgroup->in_use <= machine->limit - machine->in_use))
    return cgroup;
  if (!machine) problem = "/proc/meminfo has no MemTotal and MemAvailable";
  return machine;
}

}  // namespace kwd::platform
