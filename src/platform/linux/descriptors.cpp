#include "kwd/platform/descriptors.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace kwd::platform {

int cloexec_socket(int domain, int type, bool nonblocking) {
  return ::socket(domain, type | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
}

int cloexec_accept(int listener) {
  return ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
}

int cloexec_nonblocking_pipe(int fds[2]) {
  return ::pipe2(fds, O_CLOEXEC | O_NONBLOCK);
}

int cloexec_socket_pair(int type, int fds[2]) {
  return ::socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, fds);
}

}  // namespace kwd::platform
