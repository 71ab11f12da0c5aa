#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace kwd::platform {

// The memory this process and what it starts may take, for `smoke -j auto` to pack kernels
// into. One implementation per platform folder under src/platform/.
struct MemoryRoom {
  std::int64_t limit = 0;   // bytes: the ceiling in force
  std::int64_t in_use = 0;  // bytes already held under it that cannot be reclaimed
  // In words, for the user: where the ceiling comes from ("the memory cgroup
  // /sys/fs/cgroup/memory/ci (memory.limit_in_bytes)", "the machine's available memory").
  std::string source;
};

// The tighter of this process's memory cgroup limit (v2 memory.max, v1
// memory.limit_in_bytes, the tightest along its path) and the machine's available memory.
// nullopt, with `problem` in words, when neither can be read.
std::optional<MemoryRoom> memory_room(std::string& problem);

}  // namespace kwd::platform
