#include "kwd/platform/file_time.hpp"

namespace kwd::platform {

std::int64_t modified_ms(const struct stat& st) {
  return modified_ns(st) / 1'000'000;
}

std::int64_t modified_ns(const struct stat& st) {
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

}  // namespace kwd::platform
