#include <catch2/catch.hpp>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "kwd/loop/event_loop.hpp"
#include "kwd/protocol/heartbeat_monitor.hpp"

using namespace std::chrono_literals;
using kwd::protocol::ConnectionInfo;
using kwd::protocol::HeartbeatMonitor;
using kwd::protocol::HeartbeatOptions;

namespace {

// A kernel heartbeat as ipykernel has it: a ROUTER that echoes every message back, which the
// test can silence (as SIGSTOP would) and wake up again.
struct EchoKernel {
  zmq::context_t context{1};
  zmq::socket_t router{context, zmq::socket_type::router};
  bool answering = true;
  int port = 0;

  EchoKernel() {
    router.set(zmq::sockopt::linger, 0);
    router.bind("tcp://127.0.0.1:*");
    const std::string endpoint = router.get(zmq::sockopt::last_endpoint);
    port = std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
  }
  void pump() {
    std::vector<zmq::message_t> parts;
    for (;;) {
      parts.clear();
      zmq::message_t part;
      if (!router.recv(part, zmq::recv_flags::dontwait)) return;
      parts.push_back(std::move(part));
      while (parts.back().more()) {
        zmq::message_t more;
        (void)router.recv(more);
        parts.push_back(std::move(more));
      }
      if (!answering) continue;  // swallowed: the peer never hears back
      for (std::size_t i = 0; i < parts.size(); ++i)
        router.send(parts[i],
                    i + 1 < parts.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  }
};

}  // namespace

TEST_CASE("heartbeats: misses make one hang per episode, answers end it") {
  EchoKernel kernel;
  kwd::loop::EventLoop loop;
  loop.watch_socket(kernel.router.handle(), [&] { kernel.pump(); });

  ConnectionInfo info;
  info.hb_port = kernel.port;
  info.iopub_port = 1;
  HeartbeatOptions options;
  options.interval = 40ms;
  options.timeout = 40ms;
  options.misses_to_hang = 3;
  zmq::context_t context(1);
  std::vector<int> hangs;
  bool alive = true;
  HeartbeatMonitor hb(
      context, loop, info, {}, options, [&] { return alive; },
      [&](int misses) { hangs.push_back(misses); });
  hb.start();

  // Phase 1: answering. Phase 2: silent long enough for ~8 misses. Phase 3: answering.
  loop.after(400ms, [&] {
    CHECK(hb.beats_total() >= 3);
    CHECK(hb.misses_total() == 0);
    kernel.answering = false;
  });
  loop.after(800ms, [&] {
    CHECK(hb.in_hang());
    CHECK(hb.consecutive_misses() >= 5);
    kernel.answering = true;
  });
  loop.after(1200ms, [&] { loop.stop(); });
  REQUIRE(loop.run());

  CHECK(hangs == std::vector<int>{3});  // exactly one report for the episode
  CHECK(hb.hang_episodes() == 1);
  CHECK_FALSE(hb.in_hang());
  CHECK(hb.consecutive_misses() == 0);
  CHECK(hb.misses_total() >= 5);
  REQUIRE(hb.last_beat_ms().has_value());
  const auto& history = hb.history();
  REQUIRE_FALSE(history.empty());
  CHECK(history.back().ok);
  CHECK(history.back().rtt_ms >= 0);
  bool saw_miss = false;
  for (const auto& b : history)
    saw_miss = saw_miss || !b.ok;
  CHECK(saw_miss);
}

TEST_CASE("heartbeats: no hang while the process is not alive, nor before it ever answered") {
  EchoKernel kernel;
  kernel.answering = false;  // never answers at all: a kernel still starting
  kwd::loop::EventLoop loop;
  loop.watch_socket(kernel.router.handle(), [&] { kernel.pump(); });
  ConnectionInfo info;
  info.hb_port = kernel.port;
  info.iopub_port = 1;
  HeartbeatOptions options;
  options.interval = 20ms;
  options.timeout = 20ms;
  options.misses_to_hang = 2;
  zmq::context_t context(1);
  int hangs = 0;
  bool alive = true;
  HeartbeatMonitor hb(
      context, loop, info, {}, options, [&] { return alive; }, [&](int) { ++hangs; });
  hb.start();
  loop.after(200ms, [&] {
    CHECK(hb.misses_total() >= 4);
    CHECK(hangs == 0);  // never answered: not armed
    kernel.answering = true;
  });
  loop.after(300ms, [&] {
    CHECK(hb.beats_total() >= 1);
    alive = false;  // now it dies: silence is death, not a hang
    kernel.answering = false;
  });
  loop.after(500ms, [&] { loop.stop(); });
  REQUIRE(loop.run());
  CHECK(hangs == 0);
  CHECK(hb.consecutive_misses() >= 3);
}
