#include "kwd/platform/file_in_root.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kwd/platform/regular_file.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::platform {

FileInRoot read_file_in_root(const std::string& root_dir, const std::string& path,
                             std::size_t max_bytes) {
  FileInRoot out;
  const util::UniqueFd root(::open(root_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) {
    out.problem = "cannot open " + root_dir + ": " + std::strerror(errno);
    return out;
  }
  open_how how{};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  const util::UniqueFd handle(
      static_cast<int>(::syscall(SYS_openat2, root.get(), path.c_str(), &how, sizeof how)));
  if (!handle) {
    out.missing = errno == ENOENT;
    if (!out.missing) out.problem = path + ": " + std::strerror(errno);
    return out;
  }
  // Reopened for reading through the O_PATH descriptor, once it is known to be a regular file
  // (a FIFO would block, a device's driver would see the open).
  struct stat st {};
  if (::fstat(handle.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    out.problem = path + ": not a regular file";
    return out;
  }
  const std::string self = "/proc/self/fd/" + std::to_string(handle.get());
  const util::UniqueFd fd(::open(self.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd) {
    out.problem = path + ": " + std::strerror(errno);
    return out;
  }
  out.owner = st.st_uid;
  out.text = read_up_to(fd.get(), max_bytes);
  if (!out.text) out.problem = path + ": read failed";
  return out;
}

}  // namespace kwd::platform
