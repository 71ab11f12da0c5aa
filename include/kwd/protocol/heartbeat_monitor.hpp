#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <zmq.hpp>

#include "kwd/loop/event_loop.hpp"
#include "kwd/protocol/connection_file.hpp"
#include "kwd/protocol/listener_options.hpp"
#include "kwd/protocol/wire.hpp"

namespace kwd::protocol {

struct Beat {
  std::int64_t t_ms = 0;  // wall clock of the ping
  bool ok = false;
  double rtt_ms = 0;  // when ok
};

// Pings the kernel's heartbeat port (REQ; the kernel echoes from a thread of its own that
// needs no GIL) and counts misses. After a miss the REQ socket is thrown away and a new one
// made: a REQ whose reply was lost can never send again. N consecutive misses while the
// process is alive make a hang, reported once per episode; the first answer after it ends
// the episode.
class HeartbeatMonitor {
 public:
  using AliveCheck = std::function<bool()>;
  using HangHandler = std::function<void(int consecutive_misses)>;

  // `at_rest`: whether the kernel is at rest now, for options.idle_interval (unset: never).
  // `busy`: whether IOPub says a cell runs, for options.answered_while_busy (unset: never).
  HeartbeatMonitor(zmq::context_t& context, loop::EventLoop& loop, ConnectionInfo info,
                   WireLimits limits, HeartbeatOptions options, AliveCheck alive,
                   HangHandler on_hang, std::function<bool()> at_rest = {},
                   std::function<bool()> busy = {});
  ~HeartbeatMonitor();
  HeartbeatMonitor(const HeartbeatMonitor&) = delete;
  HeartbeatMonitor& operator=(const HeartbeatMonitor&) = delete;

  // Connects and sends the first ping now.
  void start();
  // The kernel may no longer be at rest (it went busy): the next ping comes within the
  // interval rather than the idle interval. Nothing changes while a ping is out.
  void reconsider_pace();

  [[nodiscard]] const HeartbeatOptions& options() const noexcept { return options_; }
  [[nodiscard]] int consecutive_misses() const noexcept { return consecutive_misses_; }
  [[nodiscard]] std::uint64_t misses_total() const noexcept { return misses_total_; }
  [[nodiscard]] std::uint64_t beats_total() const noexcept { return beats_total_; }
  [[nodiscard]] std::optional<std::int64_t> last_beat_ms() const noexcept { return last_beat_ms_; }
  [[nodiscard]] int hang_episodes() const noexcept { return hang_episodes_; }
  [[nodiscard]] bool in_hang() const noexcept { return in_hang_; }
  [[nodiscard]] const std::deque<Beat>& history() const noexcept { return history_; }

 private:
  void open_socket();
  void close_socket();
  void ping();
  void on_readable();
  void on_deadline();
  void schedule_next_ping();
  void record(bool ok, double rtt_ms);

  zmq::context_t& context_;
  loop::EventLoop& loop_;
  ConnectionInfo info_;
  WireLimits limits_;
  HeartbeatOptions options_;
  AliveCheck alive_;
  HangHandler on_hang_;
  std::function<bool()> at_rest_;
  std::function<bool()> busy_;

  std::optional<zmq::socket_t> socket_;
  std::optional<loop::EventLoop::TimerId> timer_;
  bool outstanding_ = false;
  std::int64_t sent_ns_ = 0;
  std::int64_t sent_wall_ms_ = 0;
  std::uint64_t sequence_ = 0;

  bool answered_once_ = false;  // no hang before the kernel has answered at all
  bool in_hang_ = false;
  std::int64_t hang_started_ms_ = 0;
  int consecutive_misses_ = 0;
  std::uint64_t misses_total_ = 0;
  std::uint64_t beats_total_ = 0;
  int hang_episodes_ = 0;
  std::optional<std::int64_t> last_beat_ms_;
  std::deque<Beat> history_;
};

}  // namespace kwd::protocol
