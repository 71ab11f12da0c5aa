#include "kwd/platform/file_time.hpp"

namespace kwd::platform {

std::int64_t modified_ms(const struct stat& st) {
  return static_cast<std::int64_t>(st.st_mtimespec.tv_sec) * 1000 +
         st.st_mtimespec.tv_nsec / 1'000'000;
}

}  // namespace kwd::platform
