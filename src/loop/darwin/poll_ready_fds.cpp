#include <poll.h>

#include <unordered_map>

#include "kwd/loop/ready_fds.hpp"

namespace kwd::loop {

// poll(2) over every fd on each wait: what the loop did everywhere before the epoll set.
struct ReadyFds::Impl {
  std::unordered_map<int, int> added;  // fd -> how many times
  std::vector<pollfd> fds;
};

ReadyFds::ReadyFds() : impl_(std::make_unique<Impl>()) {}

ReadyFds::~ReadyFds() = default;

void ReadyFds::add(int fd) {
  if (fd >= 0) ++impl_->added[fd];
}

void ReadyFds::remove(int fd) {
  const auto it = impl_->added.find(fd);
  if (it != impl_->added.end() && --it->second == 0) impl_->added.erase(it);
}

int ReadyFds::wait(int timeout_ms, std::vector<int>& ready) {
  ready.clear();
  impl_->fds.clear();
  for (const auto& [fd, count] : impl_->added)
    impl_->fds.push_back({fd, POLLIN, 0});
  const int n = ::poll(impl_->fds.data(), static_cast<nfds_t>(impl_->fds.size()), timeout_ms);
  if (n < 0) return -1;
  for (const auto& p : impl_->fds)
    if (p.revents & (POLLIN | POLLERR | POLLHUP)) ready.push_back(p.fd);
  return n;
}

}  // namespace kwd::loop
