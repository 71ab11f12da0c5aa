#include "kwd/loop/signal_pipe.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <stdexcept>

#include "kwd/util/errno_text.hpp"

namespace kwd::loop {
namespace {

std::atomic<int> g_write_fd{-1};

extern "C" void on_signal(int signo) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(signo);
  const int fd = g_write_fd.load(std::memory_order_relaxed);
  if (fd >= 0) [[maybe_unused]]
    auto n = ::write(fd, &byte, 1);
  errno = saved;
}

void make_nonblocking_cloexec(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
}

}  // namespace

SignalPipe::SignalPipe(std::initializer_list<int> signals) : signals_(signals) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error(util::cannot("create", "the signal pipe", errno));
  read_end_.reset(fds[0]);
  write_end_.reset(fds[1]);
  make_nonblocking_cloexec(fds[0]);
  make_nonblocking_cloexec(fds[1]);
  g_write_fd.store(fds[1]);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int s : signals_)
    ::sigaction(s, &sa, nullptr);
}

SignalPipe::~SignalPipe() {
  struct sigaction sa {};
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  for (int s : signals_)
    ::sigaction(s, &sa, nullptr);
  g_write_fd.store(-1);
}

std::vector<int> SignalPipe::drain() {
  std::vector<int> out;
  unsigned char buf[64];
  for (;;) {
    const ssize_t n = ::read(read_end_.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i)
      out.push_back(buf[i]);
  }
  return out;
}

}  // namespace kwd::loop
