#include "kwd/platform/resident_pages.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <fstream>
#include <string>

namespace kwd::platform {
namespace {

struct Mapping {
  std::uintptr_t start = 0, end = 0;
  bool candidate = false;  // file-backed and not writable
  std::size_t resident_kb = 0, anonymous_kb = 0;
};

std::size_t release(const Mapping& m) {
  // A page this process wrote is anonymous now: dropping it would bring back the file's bytes.
  if (!m.candidate || m.anonymous_kb != 0 || m.resident_kb == 0 || m.end <= m.start) return 0;
  if (::madvise(reinterpret_cast<void*>(m.start), m.end - m.start, MADV_DONTNEED) != 0) return 0;
  return m.resident_kb * 1024;
}

}  // namespace

std::size_t release_unwritten_file_pages() noexcept {
  try {
    std::ifstream smaps("/proc/self/smaps");
    std::size_t released = 0;
    Mapping current;
    for (std::string line; std::getline(smaps, line);) {
      const auto colon = line.find(':');
      const auto space = line.find(' ');
      if (colon == std::string::npos || (space != std::string::npos && space < colon)) {
        // A mapping's first line: "start-end perms offset dev inode [path]".
        released += release(current);
        current = Mapping{};
        const auto dash = line.find('-');
        if (dash == std::string::npos || space == std::string::npos || dash > space) continue;
        current.start = std::stoull(line.substr(0, dash), nullptr, 16);
        current.end = std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16);
        const std::string perms = line.substr(space + 1, 4);
        const auto path = line.find('/', space);
        current.candidate = perms.size() == 4 && perms[1] != 'w' && path != std::string::npos;
      } else if (line.starts_with("Rss:")) {
        current.resident_kb = std::stoul(line.substr(colon + 1));
      } else if (line.starts_with("Anonymous:")) {
        current.anonymous_kb = std::stoul(line.substr(colon + 1));
      }
    }
    released += release(current);
    return released;
  } catch (...) {  // smaps unreadable or not as expected: nothing is released
    return 0;
  }
}

}  // namespace kwd::platform
