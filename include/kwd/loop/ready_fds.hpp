#pragma once

#include <memory>
#include <vector>

namespace kwd::loop {

// The plain fds an event loop waits on (pidfds, pipes, inotify, the sockets' ZMQ_FDs), behind
// one call. Linux: an epoll set, so a wake-up costs what is ready, not what is watched (a
// daemon with 500 kernels waits on 1000 fds about a hundred times a second); elsewhere poll(2).
// One implementation per platform folder.
class ReadyFds {
 public:
  ReadyFds();
  ~ReadyFds();
  ReadyFds(const ReadyFds&) = delete;
  ReadyFds& operator=(const ReadyFds&) = delete;

  // Counted: an fd added twice is waited on until it is removed twice.
  void add(int fd);
  void remove(int fd);
  // Waits up to `timeout_ms` (-1: without end) until one is readable, in error or hung up,
  // and puts those in `ready`. Returns -1 with errno set when waiting failed (EINTR included).
  int wait(int timeout_ms, std::vector<int>& ready);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kwd::loop
