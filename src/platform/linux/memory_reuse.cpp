#include "kwd/platform/memory_reuse.hpp"

#include <malloc.h>
#include <spdlog/spdlog.h>

#include <cstdint>

#include "kwd/platform/host.hpp"

namespace kwd::platform {

void keep_freed_memory_for_reuse() {
#ifdef __GLIBC__
  // Blocks up to 32 MiB (glibc's largest mmap threshold on 64-bit) come from the heap rather
  // than a mapping of their own, which is unmapped when freed; and the heap's free top goes
  // back to the system only beyond 512 MiB. Either setting also stops glibc adjusting them.
  if (::mallopt(M_MMAP_THRESHOLD, 32 << 20) != 1 || ::mallopt(M_TRIM_THRESHOLD, 512 << 20) != 1)
    spdlog::debug("the allocator refused the settings that keep freed memory for reuse");
#endif
}

void return_large_blocks_at_once() {
#ifdef __GLIBC__
  // Fixed, so glibc never raises it (nor, with it, the heap's trim threshold).
  if (::mallopt(M_MMAP_THRESHOLD, 1 << 20) != 1)
    spdlog::debug("the allocator refused a fixed threshold for blocks of their own");
#endif
}

void give_freed_memory_back_if_grown() {
#ifdef __GLIBC__
  static std::int64_t settled = -1;  // resident bytes after the last give-back
  constexpr std::int64_t kGrowth = std::int64_t{16} << 20;
  const std::int64_t now = self_resident_bytes();
  if (now <= 0) return;
  if (settled < 0 || now < settled) settled = now;
  if (now - settled < kGrowth) return;
  ::malloc_trim(0);
  settled = self_resident_bytes();
  spdlog::debug("gave freed memory back: resident {} MiB, was {} MiB", settled >> 20, now >> 20);
#endif
}

}  // namespace kwd::platform
