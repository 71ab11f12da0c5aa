#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

namespace kwd::supervisor {

// One watched kernel = one single-threaded loop: zmq_poll over ZeroMQ sockets and plain
// fds together, plus interval timers. Handlers run on the loop's thread, one at a time.
class EventLoop {
 public:
  using Handler = std::function<void()>;
  using TimerId = std::uint64_t;

  void watch_fd(int fd, Handler on_readable);
  // `zmq_socket` is the raw libzmq handle (cppzmq: `socket.handle()`).
  void watch_socket(void* zmq_socket, Handler on_readable);
  void unwatch_fd(int fd);
  void unwatch_socket(void* zmq_socket);

  TimerId every(std::chrono::milliseconds interval, Handler on_tick);
  TimerId after(std::chrono::milliseconds delay, Handler on_fire);
  void cancel(TimerId id);

  // Runs until stop(); returns false if polling itself failed.
  bool run();
  void stop() noexcept { running_ = false; }

 private:
  struct Watch {
    void* socket;
    int fd;
    Handler handler;
    bool removed;
  };
  struct Timer {
    TimerId id;
    std::int64_t due_ns;
    std::int64_t interval_ns;  // 0 = one-shot
    Handler handler;
  };
  void fire_due_timers();
  [[nodiscard]] long poll_timeout_ms() const;

  std::vector<Watch> watches_;
  std::vector<Timer> timers_;
  TimerId next_timer_ = 1;
  bool running_ = false;
};

}  // namespace kwd::supervisor
