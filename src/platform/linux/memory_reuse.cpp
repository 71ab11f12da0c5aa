#include "kwd/platform/memory_reuse.hpp"

#include <malloc.h>
#include <spdlog/spdlog.h>

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

}  // namespace kwd::platform
