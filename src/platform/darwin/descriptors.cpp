// macOS has no SOCK_CLOEXEC, SOCK_NONBLOCK or accept4, and its pipe2 is only in macOS 27:
// each descriptor gets its flags from fcntl(2) right after it is made.
#include "kwd/platform/descriptors.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace kwd::platform {
namespace {

// Sets FD_CLOEXEC, and O_NONBLOCK on or off; closes `fd` and returns -1 when fcntl fails.
int with_flags(int fd, bool nonblocking) {
  if (fd < 0) return fd;
  const int status = ::fcntl(fd, F_GETFL);
  if (::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 || status < 0 ||
      ::fcntl(fd, F_SETFL, nonblocking ? status | O_NONBLOCK : status & ~O_NONBLOCK) != 0) {
    const int error = errno;
    ::close(fd);
    errno = error;
    return -1;
  }
  return fd;
}

// with_flags on both ends of a new pair; on failure both are closed.
int both_with_flags(int fds[2], bool nonblocking) {
  if (with_flags(fds[0], nonblocking) < 0) {
    ::close(fds[1]);
    return -1;
  }
  if (with_flags(fds[1], nonblocking) < 0) {
    ::close(fds[0]);
    return -1;
  }
  return 0;
}

}  // namespace

int cloexec_socket(int domain, int type, bool nonblocking) {
  return with_flags(::socket(domain, type, 0), nonblocking);
}

int cloexec_accept(int listener) {
  return with_flags(::accept(listener, nullptr, nullptr), false);
}

int cloexec_nonblocking_pipe(int fds[2]) {
  if (::pipe(fds) != 0) return -1;
  return both_with_flags(fds, true);
}

int cloexec_socket_pair(int type, int fds[2]) {
  if (::socketpair(AF_UNIX, type, 0, fds) != 0) return -1;
  return both_with_flags(fds, false);
}

}  // namespace kwd::platform
