// /proc/self/mountinfo, /proc/PID/cgroup and the cgroup files (memory.max, memory.events,
// memory.current, memory.oom_control...). Mount points and cgroup paths are names users pick.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kwd/platform/linux/cgroup_fs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kwd::platform::linux_proc;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto mounts = parse_cgroup_mounts(text);
  const auto member = parse_proc_cgroup(text);
  // Where the process's cgroup lies under each mount, as memory_cgroup_of puts them together.
  for (const auto* mount : {&mounts.v2, &mounts.v1_memory}) {
    if (!mount->has_value()) continue;
    for (const auto* path : {&member.v2, &member.v1_memory})
      if (path->has_value()) (void)cgroup_dir(**mount, **path);
    (void)cgroup_dir(**mount, text);
  }
  (void)parse_flat_keyed(text);
  (void)parse_memory_limit(text);
  (void)parse_number(text);
  return 0;
}
