#include "kwd/supervisor/event_loop.hpp"

#include <zmq.h>

#include <algorithm>
#include <cerrno>

#include "kwd/util/clock.hpp"

namespace kwd::supervisor {

void EventLoop::watch_fd(int fd, Handler on_readable) {
  watches_.push_back({nullptr, fd, std::move(on_readable), false});
}

void EventLoop::watch_socket(void* zmq_socket, Handler on_readable) {
  watches_.push_back({zmq_socket, -1, std::move(on_readable), false});
}

void EventLoop::unwatch_fd(int fd) {
  for (auto& w : watches_)
    if (w.socket == nullptr && w.fd == fd) w.removed = true;
}

void EventLoop::unwatch_socket(void* zmq_socket) {
  for (auto& w : watches_)
    if (w.socket == zmq_socket) w.removed = true;
}

EventLoop::TimerId EventLoop::every(std::chrono::milliseconds interval, Handler on_tick) {
  const std::int64_t ns = std::max<std::int64_t>(interval.count(), 1) * 1'000'000;
  timers_.push_back({next_timer_, util::steady_ns() + ns, ns, std::move(on_tick)});
  return next_timer_++;
}

EventLoop::TimerId EventLoop::after(std::chrono::milliseconds delay, Handler on_fire) {
  timers_.push_back(
      {next_timer_, util::steady_ns() + delay.count() * 1'000'000, 0, std::move(on_fire)});
  return next_timer_++;
}

void EventLoop::cancel(TimerId id) {
  std::erase_if(timers_, [id](const Timer& t) { return t.id == id; });
}

long EventLoop::poll_timeout_ms() const {
  if (timers_.empty()) return -1;
  std::int64_t soonest = timers_.front().due_ns;
  for (const auto& t : timers_)
    soonest = std::min(soonest, t.due_ns);
  const std::int64_t wait_ns = soonest - util::steady_ns();
  if (wait_ns <= 0) return 0;
  return static_cast<long>((wait_ns + 999'999) / 1'000'000);
}

void EventLoop::fire_due_timers() {
  const std::int64_t now = util::steady_ns();
  std::vector<TimerId> due;
  for (const auto& t : timers_)
    if (t.due_ns <= now) due.push_back(t.id);
  for (TimerId id : due) {
    auto it =
        std::find_if(timers_.begin(), timers_.end(), [id](const Timer& t) { return t.id == id; });
    if (it == timers_.end()) continue;  // cancelled by an earlier handler
    Handler handler = it->handler;
    if (it->interval_ns > 0) {
      // Skip missed ticks rather than bursting to catch up.
      do
        it->due_ns += it->interval_ns;
      while (it->due_ns <= now);
    } else {
      timers_.erase(it);
    }
    handler();
    if (!running_) return;
  }
}

bool EventLoop::run() {
  running_ = true;
  std::vector<zmq_pollitem_t> items;
  std::vector<std::size_t> owners;
  while (running_) {
    std::erase_if(watches_, [](const Watch& w) { return w.removed; });
    items.clear();
    owners.clear();
    for (std::size_t i = 0; i < watches_.size(); ++i) {
      items.push_back({watches_[i].socket, watches_[i].fd, ZMQ_POLLIN, 0});
      owners.push_back(i);
    }
    const int n = zmq_poll(items.data(), static_cast<int>(items.size()), poll_timeout_ms());
    if (n < 0) {
      if (zmq_errno() == EINTR) continue;
      running_ = false;
      return false;
    }
    for (std::size_t k = 0; k < items.size() && running_; ++k) {
      if ((items[k].revents & (ZMQ_POLLIN | ZMQ_POLLERR)) == 0) continue;
      Watch& w = watches_[owners[k]];
      if (w.removed) continue;
      Handler handler = w.handler;  // the handler may add watches and move `watches_`
      handler();
    }
    if (running_) fire_due_timers();
  }
  return true;
}

}  // namespace kwd::supervisor
