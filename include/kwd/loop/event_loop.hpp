#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kwd/loop/ready_fds.hpp"

namespace kwd::loop {

// One watched kernel = one single-threaded loop: plain fds and ZeroMQ sockets in one wait
// (ReadyFds: epoll on Linux), plus timers. Handlers run on the loop's thread, one at a time.
//
// ZeroMQ sockets are watched through their ZMQ_FD, which only says "look at ZMQ_EVENTS":
// it is edge-like, and any operation on the socket can consume the wake-up that announced a
// message. So a socket's events are read after its fd fires, after its handler ran (until
// it has nothing left), and after socket_used(). An idle wake-up then costs one poll(2), not
// the two zmq_poll passes with a check of every socket that zmq_poll makes.
class EventLoop {
 public:
  using Handler = std::function<void()>;
  using TimerId = std::uint64_t;

  void watch_fd(int fd, Handler on_readable);
  // `zmq_socket` is the raw libzmq handle (cppzmq: `socket.handle()`). The handler is called
  // while the socket has input; it may leave some for the next call (a budget), never all.
  void watch_socket(void* zmq_socket, Handler on_readable);
  void unwatch_fd(int fd);
  void unwatch_socket(void* zmq_socket);
  // Code that sends on, connects or reconnects a watched socket outside its own handler says
  // so, because that can swallow the wake-up of a message that arrived meanwhile.
  void socket_used(void* zmq_socket);

  // A coarse timer may fire up to a fifth of its delay late, and at most kCoarseGrain: its due
  // time is rounded up to a grid of 1 s, 100, 10 or 1 ms, so the timers that need no precision (an
  // idle kernel's samples, heartbeat pings, slow polls) of hundreds of kernels share wake-ups
  // instead of each waking the process on its own.
  enum class Precision { exact, coarse };
  static constexpr std::chrono::milliseconds kCoarseGrain{1000};

  TimerId every(std::chrono::milliseconds interval, Handler on_tick,
                Precision precision = Precision::exact);
  TimerId after(std::chrono::milliseconds delay, Handler on_fire,
                Precision precision = Precision::exact);
  void cancel(TimerId id);

  // Runs until stop(); returns false if polling itself failed.
  bool run();
  void stop() noexcept { running_ = false; }

 private:
  struct Watch {
    void* socket;
    int fd;  // a socket's ZMQ_FD; -1 if libzmq would not give one (checked on every pass)
    Handler handler;
    bool removed;
    bool check;  // a socket whose events must be read before the loop may block
  };
  struct Timer {
    std::int64_t due_ns;       // when it fires: base_ns rounded up to its grain
    std::int64_t base_ns;      // when it is due, by its delay or interval alone
    std::int64_t interval_ns;  // 0 = one-shot
    std::int64_t grain_ns;     // 0 = exact
    Handler handler;
  };
  // Calls the handler of every socket that has input; true if any may have more.
  bool service_sockets();
  void fire_due_timers();
  [[nodiscard]] long poll_timeout_ms() const;

  // The loop's own fds: a removed watch leaves it at once (its fd may be closed next).
  ReadyFds ready_;
  std::vector<Watch> watches_;
  // A daemon holds thousands of timers (a few per watched kernel): found by id, and kept in
  // order of their due time, so a wake-up looks at the ones due and no others.
  std::unordered_map<TimerId, Timer> timers_;
  std::set<std::pair<std::int64_t, TimerId>> timer_queue_;
  TimerId next_timer_ = 1;
  std::int64_t next_socket_sweep_ns_ = 0;
  bool running_ = false;
};

}  // namespace kwd::loop
