#include "kwd/launch/stderr_tee.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <string_view>

#include "kwd/util/clock.hpp"
#include "kwd/util/errno_text.hpp"

namespace kwd::launch {

StderrTee::StderrTee(std::size_t capacity, bool passthrough)
    : ring_(capacity), passthrough_ok_(passthrough) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error(util::cannot("create", "the stderr pipe", errno));
  read_end_.reset(fds[0]);
  child_end_.reset(fds[1]);
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  ::fcntl(fds[0], F_SETFD, FD_CLOEXEC);
  ::fcntl(fds[1], F_SETFD, FD_CLOEXEC);  // posix_spawn's dup2 onto fd 2 clears it there
}

bool StderrTee::pump() {
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(read_end_.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return true;    // EAGAIN: drained for now
    if (n == 0) return false;  // every writer is gone
    inject(std::string_view(buf, static_cast<std::size_t>(n)));
  }
}

void StderrTee::keep_for_report(std::string_view bytes) {
  ring_.append(bytes, util::wall_ms());
}

void StderrTee::inject(std::string_view chunk) {
  ring_.append(chunk, util::wall_ms());
  std::size_t done = 0;
  while (passthrough_ok_ && done < chunk.size()) {
    const ssize_t w = ::write(STDERR_FILENO, chunk.data() + done, chunk.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      passthrough_ok_ = false;  // our stderr is gone; keep collecting for the report
      break;
    }
    done += static_cast<std::size_t>(w);
  }
}

}  // namespace kwd::launch
