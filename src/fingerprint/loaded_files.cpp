#include "kwd/fingerprint/loaded_files.hpp"

#include <algorithm>

namespace kwd::fingerprint {

std::vector<std::string> mapped_files(std::string_view maps_text) {
  std::vector<std::string> files;
  std::size_t start = 0;
  while (start < maps_text.size()) {
    auto end = maps_text.find('\n', start);
    if (end == std::string_view::npos) end = maps_text.size();
    std::string_view line = maps_text.substr(start, end - start);
    start = end + 1;
    // address perms offset dev inode pathname: the path is what follows the fifth field.
    std::size_t pos = 0;
    for (int field = 0; field < 5 && pos < line.size(); ++field) {
      while (pos < line.size() && line[pos] == ' ')
        ++pos;
      while (pos < line.size() && line[pos] != ' ')
        ++pos;
    }
    while (pos < line.size() && line[pos] == ' ')
      ++pos;
    std::string_view path = line.substr(std::min(pos, line.size()));
    if (path.empty() || path.front() != '/') continue;  // anonymous, [heap], [vdso], ...
    constexpr std::string_view kDeleted = " (deleted)";
    if (path.ends_with(kDeleted)) path.remove_suffix(kDeleted.size());
    files.emplace_back(path);
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  return files;
}

}  // namespace kwd::fingerprint
