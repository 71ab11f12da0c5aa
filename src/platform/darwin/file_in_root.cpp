#include "kwd/platform/file_in_root.hpp"

namespace kwd::platform {

// No openat2 and no /proc/PID/root here: another process's root is not ours to walk.
FileInRoot read_file_in_root(const std::string&, const std::string& path, std::size_t) {
  FileInRoot out;
  out.problem = path + ": reading another process's file system needs Linux";
  return out;
}

}  // namespace kwd::platform
