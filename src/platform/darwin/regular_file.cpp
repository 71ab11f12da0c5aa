#include "kwd/platform/regular_file.hpp"

#include <cerrno>

namespace kwd::platform {

RegularFile open_regular_file(int dir_fd, const char* path, int flags) {
  // No O_PATH here: the type is looked at by name first, so a FIFO or a device standing
  // there is never opened; the open then takes only the inode looked at. (Something renamed
  // into place between the two is opened, without blocking, and refused.)
  RegularFile file;
  const bool no_follow = (flags & O_NOFOLLOW) != 0;
  if (::fstatat(dir_fd, path, &file.st, no_follow ? AT_SYMLINK_NOFOLLOW : 0) != 0) {
    file.error = errno;
    return file;
  }
  if (!S_ISREG(file.st.st_mode)) {
    file.not_regular = true;
    return file;
  }
  file.fd.reset(
      ::openat(dir_fd, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (flags & O_NOFOLLOW)));
  struct stat now {};
  if (!file.fd) {
    file.error = errno;
  } else if (::fstat(file.fd.get(), &now) != 0 || now.st_dev != file.st.st_dev ||
             now.st_ino != file.st.st_ino) {
    file.fd.reset();
    file.error = ESTALE;  // replaced between the look and the open
  }
  return file;
}

}  // namespace kwd::platform
