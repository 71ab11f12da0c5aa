#include "kwd/platform/regular_file.hpp"

#include <cerrno>

namespace kwd::platform {

RegularFile open_regular_file(int dir_fd, const char* path, int flags) {
  // No O_PATH here: O_NONBLOCK keeps a FIFO from blocking, and the type is checked right
  // after the open, before anything is read.
  RegularFile file;
  file.fd.reset(
      ::openat(dir_fd, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (flags & O_NOFOLLOW)));
  if (!file.fd) {
    // A symbolic link refused by O_NOFOLLOW is a file of the wrong type, as on Linux.
    file.not_regular = errno == ELOOP && (flags & O_NOFOLLOW) != 0;
    file.error = file.not_regular ? 0 : errno;
    return file;
  }
  if (::fstat(file.fd.get(), &file.st) != 0) {
    file.error = errno;
    file.fd.reset();
    return file;
  }
  if (!S_ISREG(file.st.st_mode)) {
    file.not_regular = true;
    file.fd.reset();
  }
  return file;
}

}  // namespace kwd::platform
