#include "kwd/util/self_exe.hpp"

#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <vector>

namespace kwd::util {
namespace fs = std::filesystem;

std::optional<fs::path> find_on_path(const std::string& name) {
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), X_OK) == 0) return fs::absolute(name);
    return std::nullopt;
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) dir = ".";
    const fs::path candidate = fs::path(dir) / name;
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0)
      return fs::absolute(candidate);
  }
  return std::nullopt;
}

}  // namespace kwd::util
