#include "kwd/loop/event_loop.hpp"

#include <spdlog/spdlog.h>
#include <zmq.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <string>
#include <unordered_map>

#include "kwd/util/clock.hpp"

namespace kwd::loop {

namespace {

// Every socket's events are read at least this often whatever its fd says: a wake-up lost
// to an operation nobody reported costs at most this much delay, never a stall. Each read
// costs libzmq a poll(2) of the socket's mailbox, so a loop with many sockets (a node
// daemon's 800, for 200 kernels) sweeps less often: about kSweptPerSecond reads a second.
constexpr std::int64_t kSocketSweepNs = 1'000'000'000;
constexpr std::int64_t kSweptPerSecond = 100;
// A socket without a ZMQ_FD is looked at this often.
constexpr long kFdlessSocketPollMs = 20;

// The same failure on every message (a forged field the code did not expect) must not
// flood the log: the first few of each kind are said, then every 1000th with its count.
void say_internal_error(const std::string& what) {
  constexpr std::size_t kKindsKept = 64;
  constexpr std::uint64_t kSaidInFull = 3;
  static std::unordered_map<std::string, std::uint64_t> seen;
  static std::uint64_t others = 0;
  const bool known = seen.contains(what) || seen.size() < kKindsKept;
  const std::uint64_t n = known ? ++seen[what] : ++others;
  if (n <= kSaidInFull)
    spdlog::error("internal error, carrying on: {}", what);
  else if (n % 1000 == 0)
    spdlog::error("internal error, carrying on ({} times so far{}): {}", n,
                  known ? "" : ", of kinds past the first 64", what);
}

// The grain a timer's due time is rounded up to: the largest of 1 s, 100, 10 and 1 ms that is at
// most a fifth of its delay (fixed steps, so timers of nearly equal delays, a heartbeat's 1 s
// less the last round trip, land on one grid); none for an exact timer, or one too short.
std::int64_t grain_for(EventLoop::Precision precision, std::int64_t delay_ns) {
  if (precision == EventLoop::Precision::exact) return 0;
  constexpr std::int64_t kMaxGrain =
      std::chrono::duration_cast<std::chrono::nanoseconds>(EventLoop::kCoarseGrain).count();
  for (std::int64_t grain = kMaxGrain; grain >= 1'000'000; grain /= 10)
    if (grain <= delay_ns / 5) return grain;
  return 0;
}

std::int64_t due_at(std::int64_t due_ns, std::int64_t grain_ns) {
  if (grain_ns <= 0) return due_ns;
  return (due_ns + grain_ns - 1) / grain_ns * grain_ns;
}

// A handler's exception stops at the loop: whatever one part of the watchdog could not do,
// the kernel is still watched, and its death still reported and mirrored (fail open).
void call(const EventLoop::Handler& handler) {
  try {
    handler();
  } catch (const std::exception& e) {
    say_internal_error(e.what());
  }
}

}  // namespace

void EventLoop::watch_fd(int fd, Handler on_readable) {
  ready_.add(fd);
  watches_.push_back({nullptr, fd, std::move(on_readable), false, false});
}

void EventLoop::watch_socket(void* zmq_socket, Handler on_readable) {
  int fd = -1;
  std::size_t size = sizeof fd;
  if (zmq_getsockopt(zmq_socket, ZMQ_FD, &fd, &size) != 0) fd = -1;
  ready_.add(fd);
  watches_.push_back({zmq_socket, fd, std::move(on_readable), false, true});
}

void EventLoop::socket_used(void* zmq_socket) {
  for (auto& w : watches_)
    if (w.socket == zmq_socket) w.check = true;
}

void EventLoop::unwatch_fd(int fd) {
  for (auto& w : watches_)
    if (w.socket == nullptr && w.fd == fd && !w.removed) {
      w.removed = true;
      ready_.remove(w.fd);
    }
}

void EventLoop::unwatch_socket(void* zmq_socket) {
  for (auto& w : watches_)
    if (w.socket == zmq_socket && !w.removed) {
      w.removed = true;
      ready_.remove(w.fd);
    }
}

EventLoop::TimerId EventLoop::every(std::chrono::milliseconds interval, Handler on_tick,
                                    Precision precision) {
  const std::int64_t ns = std::max<std::int64_t>(interval.count(), 1) * 1'000'000;
  const std::int64_t grain = grain_for(precision, ns);
  const std::int64_t base = util::steady_ns() + ns;
  const std::int64_t due = due_at(base, grain);
  timers_.emplace(next_timer_, Timer{due, base, ns, grain, std::move(on_tick)});
  timer_queue_.emplace(due, next_timer_);
  return next_timer_++;
}

EventLoop::TimerId EventLoop::after(std::chrono::milliseconds delay, Handler on_fire,
                                    Precision precision) {
  const std::int64_t delay_ns = delay.count() * 1'000'000;
  const std::int64_t grain = grain_for(precision, delay_ns);
  const std::int64_t base = util::steady_ns() + delay_ns;
  const std::int64_t due = due_at(base, grain);
  timers_.emplace(next_timer_, Timer{due, base, 0, grain, std::move(on_fire)});
  timer_queue_.emplace(due, next_timer_);
  return next_timer_++;
}

void EventLoop::cancel(TimerId id) {
  const auto it = timers_.find(id);
  if (it == timers_.end()) return;
  timer_queue_.erase({it->second.due_ns, id});
  timers_.erase(it);
}

long EventLoop::poll_timeout_ms() const {
  bool have_sockets = false, fdless_socket = false;
  for (const auto& w : watches_) {
    if (w.socket == nullptr || w.removed) continue;
    have_sockets = true;
    fdless_socket = fdless_socket || w.fd < 0;
  }
  if (timer_queue_.empty() && !have_sockets) return -1;
  std::int64_t soonest = have_sockets ? next_socket_sweep_ns_ : INT64_MAX;
  if (!timer_queue_.empty()) soonest = std::min(soonest, timer_queue_.begin()->first);
  const std::int64_t wait_ns = soonest - util::steady_ns();
  if (wait_ns <= 0) return 0;
  const long wait_ms =
      static_cast<long>(std::min<std::int64_t>((wait_ns + 999'999) / 1'000'000, INT32_MAX));
  return fdless_socket ? std::min(wait_ms, kFdlessSocketPollMs) : wait_ms;
}

bool EventLoop::service_sockets() {
  bool more = false;
  // By index: a handler may add watches and move `watches_`.
  for (std::size_t i = 0; i < watches_.size() && running_; ++i) {
    if (watches_[i].socket == nullptr || watches_[i].removed) continue;
    if (!watches_[i].check && watches_[i].fd >= 0) continue;
    int events = 0;
    std::size_t size = sizeof events;
    if (zmq_getsockopt(watches_[i].socket, ZMQ_EVENTS, &events, &size) != 0) {
      // Interrupted by a signal: ask again on the next pass. Anything else (a socket being
      // torn down) is left to the sweep.
      if (zmq_errno() == EINTR)
        more = true;
      else
        watches_[i].check = false;
      continue;
    }
    if ((events & ZMQ_POLLIN) == 0) {
      watches_[i].check = false;
      continue;
    }
    Handler handler = watches_[i].handler;
    call(handler);
    // Its events are read again before the loop blocks: it may have left input behind.
    if (i < watches_.size() && !watches_[i].removed) watches_[i].check = true;
    more = true;
  }
  return more;
}

void EventLoop::fire_due_timers() {
  // One pass fires timers for about this long at most. Under overload (a daemon that has
  // just found hundreds of kernels, their samples all due) what the fds say (a death, an
  // exec) is then not kept waiting behind every due timer: the rest fire in the next pass,
  // right after a look at the fds. Oldest due first, so none is left behind.
  constexpr std::int64_t kPassNs = 2'000'000;
  const std::int64_t now = util::steady_ns();
  // Timers added or re-armed by a handler are due after `now`: they wait for the next pass.
  while (running_ && !timer_queue_.empty() && timer_queue_.begin()->first <= now) {
    const TimerId id = timer_queue_.begin()->second;
    timer_queue_.erase(timer_queue_.begin());
    const auto it = timers_.find(id);
    if (it == timers_.end()) continue;
    Timer& timer = it->second;
    Handler handler;
    if (timer.interval_ns > 0) {
      // Skip missed ticks rather than bursting to catch up.
      // From the unrounded time, so a coarse timer does not drift by a grain each tick.
      do
        timer.base_ns += timer.interval_ns;
      while (timer.base_ns <= now);
      timer.due_ns = due_at(timer.base_ns, timer.grain_ns);
      timer_queue_.emplace(timer.due_ns, id);
      handler = timer.handler;  // a copy: the handler may cancel its own timer
    } else {
      handler = std::move(timer.handler);
      timers_.erase(it);
    }
    call(handler);
    if (util::steady_ns() - now >= kPassNs) break;
  }
}

bool EventLoop::run() {
  running_ = true;
  next_socket_sweep_ns_ = util::steady_ns() + kSocketSweepNs;
  std::vector<int> ready;
  while (running_) {
    std::erase_if(watches_, [](const Watch& w) { return w.removed; });
    const bool sockets_have_more = service_sockets();
    if (!running_) break;
    const long timeout = sockets_have_more ? 0 : poll_timeout_ms();
    if (ready_.wait(static_cast<int>(timeout), ready) < 0) {
      if (errno == EINTR) continue;
      running_ = false;
      return false;
    }
    // The watches of each ready fd that were there when it was found ready (a handler may
    // add some, which come after these, or remove some).
    const std::size_t watched_before = watches_.size();
    for (const int fd : ready) {
      for (std::size_t i = 0; i < std::min(watched_before, watches_.size()) && running_; ++i) {
        if (watches_[i].fd != fd || watches_[i].removed) continue;
        if (watches_[i].socket != nullptr) {
          watches_[i].check = true;
          continue;
        }
        Handler handler = watches_[i].handler;  // it may add watches and move `watches_`
        call(handler);
      }
    }
    if (const std::int64_t now = util::steady_ns(); now >= next_socket_sweep_ns_) {
      std::int64_t sockets = 0;
      for (auto& w : watches_)
        if (w.socket != nullptr && !w.removed) {
          w.check = true;
          ++sockets;
        }
      next_socket_sweep_ns_ =
          now + std::max(kSocketSweepNs, sockets * kSocketSweepNs / kSweptPerSecond);
    }
    if (running_) fire_due_timers();
  }
  return true;
}

}  // namespace kwd::loop
