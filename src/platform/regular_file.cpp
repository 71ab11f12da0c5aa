#include "kwd/platform/regular_file.hpp"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "kwd/util/wipe.hpp"

namespace kwd::platform {

std::optional<std::string> read_up_to(int fd, std::size_t max_bytes) {
  // Read straight into the string: the bytes (a connection file's key among them) are left in
  // no buffer but the one returned, and a string outgrown is wiped before it is freed.
  std::string text(std::min<std::size_t>(max_bytes, 16384), '\0');
  std::size_t used = 0;
  while (used < max_bytes) {
    if (used == text.size()) {
      std::string bigger(std::min(max_bytes, text.size() * 2), '\0');
      std::memcpy(bigger.data(), text.data(), used);
      util::wipe(text.data(), text.size());
      text.swap(bigger);
    }
    const ssize_t n = ::read(fd, text.data() + used, text.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      util::wipe(text.data(), text.size());
      errno = error;
      return std::nullopt;
    }
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
  }
  text.resize(used);  // a shrink keeps the buffer: nothing is freed unwiped
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
