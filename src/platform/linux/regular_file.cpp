#include "kwd/platform/regular_file.hpp"

#include <cerrno>
#include <string>

namespace kwd::platform {
namespace {

constexpr int kReadFlags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;

RegularFile failed(int error) {
  RegularFile file;
  file.error = error;
  return file;
}

}  // namespace

RegularFile reopen_regular_file(const util::UniqueFd& handle) {
  RegularFile file;
  if (::fstat(handle.get(), &file.st) != 0) return failed(errno);
  if (!S_ISREG(file.st.st_mode)) {
    file.not_regular = true;
    return file;
  }
  const std::string self = "/proc/self/fd/" + std::to_string(handle.get());
  file.fd.reset(::open(self.c_str(), kReadFlags));
  if (!file.fd) file.error = errno;
  return file;
}

RegularFile open_regular_file(int dir_fd, const char* path, int flags) {
  // O_PATH opens nothing for I/O: no driver's open, no wait for a FIFO's writer. Reopening
  // that descriptor through /proc reaches the same inode, whatever is renamed meanwhile.
  const util::UniqueFd handle(::openat(dir_fd, path, O_PATH | O_CLOEXEC | (flags & O_NOFOLLOW)));
  if (!handle) return failed(errno);
  RegularFile file = reopen_regular_file(handle);
  if (!file.fd && file.error == ENOENT) {
    // No /proc (a bare container): by name once more, keeping only the inode just looked at.
    // Weaker: something renamed into place between the two opens is opened (without
    // blocking) before it is refused.
    file.fd.reset(::openat(dir_fd, path, kReadFlags | (flags & O_NOFOLLOW)));
    struct stat now {};
    if (!file.fd) {
      file.error = errno;
    } else if (::fstat(file.fd.get(), &now) != 0 || now.st_dev != file.st.st_dev ||
               now.st_ino != file.st.st_ino) {
      file.fd.reset();
      file.error = ESTALE;  // replaced between the two opens
    } else {
      file.error = 0;
    }
  }
  return file;
}

}  // namespace kwd::platform
