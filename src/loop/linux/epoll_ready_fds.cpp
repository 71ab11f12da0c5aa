#include <sys/epoll.h>

#include <cerrno>
#include <stdexcept>
#include <unordered_map>

#include "kwd/loop/ready_fds.hpp"
#include "kwd/util/errno_text.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::loop {

struct ReadyFds::Impl {
  util::UniqueFd epoll;
  std::unordered_map<int, int> added;  // fd -> how many times
  std::vector<epoll_event> events = std::vector<epoll_event>(64);
};

ReadyFds::ReadyFds() : impl_(std::make_unique<Impl>()) {
  impl_->epoll.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!impl_->epoll) throw std::runtime_error(util::cannot("create", "an epoll set", errno));
}

ReadyFds::~ReadyFds() = default;

void ReadyFds::add(int fd) {
  if (fd < 0 || impl_->added[fd]++ > 0) return;
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = fd;
  // EEXIST: a number closed without being removed, whose file lives on in a dup.
  if (::epoll_ctl(impl_->epoll.get(), EPOLL_CTL_ADD, fd, &event) != 0 && errno == EEXIST)
    ::epoll_ctl(impl_->epoll.get(), EPOLL_CTL_MOD, fd, &event);
}

void ReadyFds::remove(int fd) {
  const auto it = impl_->added.find(fd);
  if (it == impl_->added.end() || --it->second > 0) return;
  impl_->added.erase(it);
  // Fails harmlessly when the fd was closed first (closing removed it already).
  ::epoll_ctl(impl_->epoll.get(), EPOLL_CTL_DEL, fd, nullptr);
}

int ReadyFds::wait(int timeout_ms, std::vector<int>& ready) {
  ready.clear();
  const int n = ::epoll_wait(impl_->epoll.get(), impl_->events.data(),
                             static_cast<int>(impl_->events.size()), timeout_ms);
  if (n < 0) return -1;
  for (int i = 0; i < n; ++i)
    if (impl_->added.contains(impl_->events[static_cast<std::size_t>(i)].data.fd))
      ready.push_back(impl_->events[static_cast<std::size_t>(i)].data.fd);
  // A full batch: the next wait may have more ready than fit this time.
  if (static_cast<std::size_t>(n) == impl_->events.size())
    impl_->events.resize(2 * impl_->events.size());
  return n;
}

}  // namespace kwd::loop
