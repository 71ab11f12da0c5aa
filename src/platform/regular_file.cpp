#include "kwd/platform/regular_file.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace kwd::platform {

std::optional<std::string> read_up_to(int fd, std::size_t max_bytes) {
  std::string text;
  char buffer[16384];
  while (text.size() < max_bytes) {
    const std::size_t want = std::min(sizeof buffer, max_bytes - text.size());
    const ssize_t n = ::read(fd, buffer, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  return text;
}

}  // namespace kwd::platform
