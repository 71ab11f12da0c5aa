#include "kwd/platform/memory_reuse.hpp"

#include <malloc.h>
#include <spdlog/spdlog.h>

#include <atomic>
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
  // Resident bytes after the last give-back; atomic, as watches on other loops may ask.
  static std::atomic<std::int64_t> settled{-1};
  constexpr std::int64_t kGrowth = std::int64_t{16} << 20;
  const std::int64_t now = self_resident_bytes();
  if (now <= 0) return;
  const std::int64_t mark = settled.load(std::memory_order_relaxed);
  if (mark < 0 || now < mark) {
    settled.store(now, std::memory_order_relaxed);
    return;
  }
  if (now - mark < kGrowth) return;
  give_freed_memory_back();
  const std::int64_t after = self_resident_bytes();
  settled.store(after, std::memory_order_relaxed);
  spdlog::debug("gave freed memory back: resident {} MiB, was {} MiB", after >> 20, now >> 20);
#endif
}

void give_freed_memory_back() {
#ifdef __GLIBC__
  ::malloc_trim(0);
#endif
}

}  // namespace kwd::platform
