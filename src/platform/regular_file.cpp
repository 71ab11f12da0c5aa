#include "kwd/platform/regular_file.hpp"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>

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

std::vector<std::string> names_in_directory(util::UniqueFd dir) {
  std::vector<std::string> names;
  if (!dir) return names;
  const std::unique_ptr<DIR, int (*)(DIR*)> stream(::fdopendir(dir.get()), ::closedir);
  if (!stream) return names;
  dir.release();  // the stream owns it now
  while (const dirent* entry = ::readdir(stream.get())) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  return names;
}

}  // namespace kwd::platform
