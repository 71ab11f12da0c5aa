#include <signal.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/time.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "kwd/loop/event_loop.hpp"
#include "kwd/protocol/kernel_socket.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/unique_fd.hpp"

using namespace std::chrono_literals;
using kwd::loop::EventLoop;

namespace {

// Two connected PAIR sockets over inproc: `ours` is watched, `peer` plays the kernel.
struct SocketPair {
  zmq::context_t context{1};
  zmq::socket_t ours{context, zmq::socket_type::pair};
  zmq::socket_t peer{context, zmq::socket_type::pair};
  explicit SocketPair(const std::string& name) {
    ours.set(zmq::sockopt::linger, 0);
    peer.set(zmq::sockopt::linger, 0);
    ours.bind("inproc://" + name);
    peer.connect("inproc://" + name);
  }
  // At most `budget` messages, as the IOPub handler takes them.
  int receive(int budget) {
    int n = 0;
    zmq::message_t m;
    while (n < budget && ours.recv(m, zmq::recv_flags::dontwait))
      ++n;
    return n;
  }
};

// The peer's message signals our socket's ZMQ_FD; our own send right after processes that
// signal, so the fd never fires for it. Only reading ZMQ_EVENTS again finds the message.
void swallow_a_wake_up(SocketPair& pair) {
  pair.peer.send(zmq::buffer("reply", 5), zmq::send_flags::none);
  (void)pair.ours.send(zmq::buffer("ping", 4), zmq::send_flags::dontwait);
}

}  // namespace

TEST_CASE("event loop: a socket handler that takes a few at a time still gets every message") {
  SocketPair pair("budget");
  for (int i = 0; i < 100; ++i)
    pair.peer.send(zmq::buffer(std::to_string(i)), zmq::send_flags::none);
  EventLoop loop;
  int received = 0;
  loop.watch_socket(pair.ours.handle(), [&] {
    received += pair.receive(3);
    if (received == 100) loop.stop();
  });
  loop.after(5s, [&] { loop.stop(); });  // a stall fails the test instead of hanging it
  REQUIRE(loop.run());
  CHECK(received == 100);
}

TEST_CASE("event loop: messages arriving later wake the loop; plain fds and timers share it") {
  SocketPair pair("later");
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  kwd::util::UniqueFd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
  EventLoop loop;
  int received = 0, pipe_reads = 0, ticks = 0;
  loop.watch_socket(pair.ours.handle(), [&] { received += pair.receive(100); });
  loop.watch_fd(read_end.get(), [&] {
    char c;
    if (::read(read_end.get(), &c, 1) == 1) ++pipe_reads;
  });
  loop.every(10ms, [&] {
    ++ticks;
    if (ticks == 3) pair.peer.send(zmq::buffer("one", 3), zmq::send_flags::none);
    if (ticks == 5) REQUIRE(::write(write_end.get(), "x", 1) == 1);
    if (ticks == 8) pair.peer.send(zmq::buffer("two", 3), zmq::send_flags::none);
    if (ticks == 12) loop.stop();
  });
  REQUIRE(loop.run());
  CHECK(received == 2);
  CHECK(pipe_reads == 1);
  CHECK(ticks == 12);
}

TEST_CASE("event loop: a wake-up swallowed by a send is recovered by socket_used") {
  SocketPair pair("swallowed");
  EventLoop loop;
  int received = 0, seen_on_next_pass = -1;
  loop.watch_socket(pair.ours.handle(), [&] { received += pair.receive(100); });
  loop.after(50ms, [&] {
    swallow_a_wake_up(pair);
    loop.socket_used(pair.ours.handle());
    // A timer added now fires on the loop's next pass, after the used socket was looked at
    // and before the loop could block again, however late this pass runs.
    loop.after(0ms, [&] {
      seen_on_next_pass = received;
      loop.stop();
    });
  });
  loop.after(5s, [&] { loop.stop(); });  // a stall fails the test instead of hanging it
  REQUIRE(loop.run());
  CHECK(seen_on_next_pass == 1);
}

TEST_CASE("event loop: a swallowed wake-up nobody reported is recovered by the sweep") {
  SocketPair pair("unreported");
  EventLoop loop;
  int received = 0;
  std::int64_t received_at_ns = 0;
  loop.watch_socket(pair.ours.handle(), [&] {
    received += pair.receive(100);
    if (received == 0) return;
    received_at_ns = kwd::util::steady_ns();
    loop.stop();
  });
  loop.after(50ms, [&] { swallow_a_wake_up(pair); });
  loop.after(5s, [&] { loop.stop(); });
  const std::int64_t started_ns = kwd::util::steady_ns();
  REQUIRE(loop.run());
  REQUIRE(received == 1);
  // It came with the sweep, due a second after the loop started: the message really was
  // stuck until then, which is the case the sweep exists for.
  CHECK(received_at_ns - started_ns >= 1'000'000'000);
}

namespace {

void ignore_alarm(int) {}

// SIGALRM every 20 µs, without SA_RESTART, while alive: the interruptions SIGCHLD brings
// when a kernel dies, only many more of them.
struct AlarmStorm {
  struct sigaction previous {};
  AlarmStorm() {
    struct sigaction sa {};
    sa.sa_handler = ignore_alarm;
    ::sigaction(SIGALRM, &sa, &previous);
    const itimerval every{{0, 20}, {0, 20}};
    ::setitimer(ITIMER_REAL, &every, nullptr);
  }
  ~AlarmStorm() {
    const itimerval off{};
    ::setitimer(ITIMER_REAL, &off, nullptr);
    ::sigaction(SIGALRM, &previous, nullptr);
  }
};

}  // namespace

TEST_CASE("receiving through signals loses and splits nothing") {
  SocketPair pair("storm");
  constexpr int kMessages = 20000;
  int received = 0, in_order = 0;
  {
    AlarmStorm storm;
    // The storm is for the receiving thread: the sender is born with SIGALRM blocked.
    sigset_t alarm;
    sigemptyset(&alarm);
    sigaddset(&alarm, SIGALRM);
    ::pthread_sigmask(SIG_BLOCK, &alarm, nullptr);
    std::thread sender([&] {
      for (int i = 0; i < kMessages; ++i) {
        pair.peer.send(zmq::buffer("head", 4), zmq::send_flags::sndmore);
        pair.peer.send(zmq::buffer(std::to_string(i)), zmq::send_flags::none);
      }
    });
    ::pthread_sigmask(SIG_UNBLOCK, &alarm, nullptr);
    while (received < kMessages) {
      zmq::message_t head, body;
      if (!kwd::protocol::recv_through_signals(pair.ours, head, zmq::recv_flags::dontwait))
        continue;
      REQUIRE(head.more());
      REQUIRE(kwd::protocol::recv_through_signals(pair.ours, body, zmq::recv_flags::none));
      if (body.to_string() == std::to_string(received)) ++in_order;
      ++received;
    }
    sender.join();
  }
  CHECK(received == kMessages);
  CHECK(in_order == kMessages);
}

TEST_CASE("event loop: a handler failing on every message logs a few lines, then counts") {
  // A forged field that throws per IOPub message must not write 20 000 log lines.
  std::ostringstream log;
  const auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  EventLoop loop;
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const kwd::util::UniqueFd read_end(fds[0]), write_end(fds[1]);
  REQUIRE(::write(write_end.get(), "x", 1) == 1);  // never read: readable on every pass
  int calls = 0;
  loop.watch_fd(read_end.get(), [&] {
    if (++calls == 20'000) loop.stop();
    throw std::runtime_error("a field of the wrong type (kind A)");
  });
  loop.run();
  spdlog::set_default_logger(previous);
  const std::string text = log.str();
  const auto lines = std::count(text.begin(), text.end(), '\n');
  INFO(text.substr(0, 2000));
  CHECK(calls == 20'000);
  CHECK(lines == 3 + 20);  // three in full, then one per thousand with the count
  CHECK(text.find("(20000 times so far): a field of the wrong type (kind A)") != std::string::npos);
}

TEST_CASE("event loop: timers fire in order of their due time; a coarse one waits for the grain") {
  using kwd::loop::EventLoop;
  using std::chrono::milliseconds;
  EventLoop loop;
  // A coarse timer's grid: 100, 10 or 1 ms, the largest at most a fifth of its delay.
  const auto grid = [](std::int64_t ns, std::int64_t grain_ns) {
    return (ns + grain_ns - 1) / grain_ns * grain_ns;
  };
  std::vector<std::pair<int, std::int64_t>> fired;  // which, when
  const std::int64_t start = kwd::util::steady_ns();
  const auto record = [&](int which) {
    return [&, which] {
      fired.emplace_back(which, kwd::util::steady_ns());
      if (fired.size() == 6) loop.stop();
    };
  };
  loop.after(milliseconds(30), record(3));
  loop.after(milliseconds(15), record(1), EventLoop::Precision::coarse);
  loop.after(milliseconds(20), record(2));
  const auto cancelled = loop.after(milliseconds(5), record(9));
  loop.after(milliseconds(2), record(0));
  loop.cancel(cancelled);
  loop.after(milliseconds(70), record(4), EventLoop::Precision::coarse);
  loop.after(milliseconds(730), record(5), EventLoop::Precision::coarse);
  REQUIRE(loop.run());
  REQUIRE(fired.size() == 6);
  // The exact ones in order of due time, each no earlier than due.
  std::vector<int> exact;
  for (const auto& [which, at] : fired)
    if (which == 0 || which == 2 || which == 3) exact.push_back(which);
  CHECK(exact == std::vector<int>{0, 2, 3});
  CHECK(fired.back().first == 5);
  for (const auto& [which, at] : fired) {
    INFO("timer " << which);
    if (which == 0) CHECK(at >= start + 2'000'000);
    if (which == 2) CHECK(at >= start + 20'000'000);
    if (which == 3) CHECK(at >= start + 30'000'000);
    // A coarse one: at its grid's boundary after its due time, or later.
    if (which == 1) CHECK(at >= grid(start + 15'000'000, 1'000'000));
    if (which == 4) CHECK(at >= grid(start + 70'000'000, 10'000'000));
    if (which == 5) CHECK(at >= grid(start + 730'000'000, 100'000'000));
    CHECK(which != 9);
  }
}

TEST_CASE("event loop: an fd that becomes ready during a long run of due timers is not kept last") {
  // Twenty timers due at once, each busy for 1 ms; the first makes a pipe readable. The fd is
  // handled after a few of them (one pass fires timers for a couple of ms), not after all.
  EventLoop loop;
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  const kwd::util::UniqueFd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
  int fired = 0;
  int fired_when_fd_handled = -1;
  loop.watch_fd(read_end.get(), [&] {
    char c;
    (void)::read(read_end.get(), &c, 1);
    fired_when_fd_handled = fired;
    loop.unwatch_fd(read_end.get());
  });
  for (int i = 0; i < 20; ++i)
    loop.after(0ms, [&, i] {
      if (i == 0) (void)::write(write_end.get(), "x", 1);
      const std::int64_t until = kwd::util::steady_ns() + 1'000'000;
      while (kwd::util::steady_ns() < until) {
      }
      if (++fired == 20) loop.stop();
    });
  loop.run();
  CHECK(fired == 20);
  CHECK(fired_when_fd_handled >= 1);
  CHECK(fired_when_fd_handled < 20);
}
