#include "kwd/platform/memory_reuse.hpp"

#include <malloc.h>

namespace kwd::platform {

void keep_freed_memory_for_reuse() {
#ifdef __GLIBC__
  // Blocks up to 64 MiB come from the heap rather than their own mapping (a freed mapping is
  // unmapped at once), and the heap's free top is returned only beyond 512 MiB.
  ::mallopt(M_MMAP_THRESHOLD, 64 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 512 << 20);
#endif
}

}  // namespace kwd::platform
