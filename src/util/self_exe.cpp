#include "kwd/util/self_exe.hpp"

#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <vector>

namespace kwd::util {
namespace fs = std::filesystem;

std::optional<fs::path> find_on_path(const std::string& name) {
  auto all = find_all_on_path(name);
  if (all.empty()) return std::nullopt;
  return all.front();
}

std::vector<fs::path> find_all_on_path(const std::string& name) {
  if (name.empty()) return {};
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), X_OK) == 0) return {fs::absolute(name)};
    return {};
  }
  std::vector<fs::path> found;
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) dir = ".";
    const fs::path candidate = fs::path(dir) / name;
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0)
      found.push_back(fs::absolute(candidate));
  }
  return found;
}

}  // namespace kwd::util
