#include "kwd/protocol/heartbeat_monitor.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "kwd/protocol/kernel_socket.hpp"
#include "kwd/util/clock.hpp"

namespace kwd::protocol {

HeartbeatMonitor::HeartbeatMonitor(zmq::context_t& context, loop::EventLoop& loop,
                                   ConnectionInfo info, WireLimits limits, HeartbeatOptions options,
                                   AliveCheck alive, HangHandler on_hang,
                                   std::function<bool()> at_rest, std::function<bool()> busy)
    : context_(context),
      loop_(loop),
      info_(std::move(info)),
      limits_(limits),
      options_(options),
      alive_(std::move(alive)),
      on_hang_(std::move(on_hang)),
      at_rest_(std::move(at_rest)),
      busy_(std::move(busy)) {
  options_.interval = std::max(options_.interval, std::chrono::milliseconds(10));
  options_.timeout = std::max(options_.timeout, std::chrono::milliseconds(10));
}

HeartbeatMonitor::~HeartbeatMonitor() {
  if (timer_) loop_.cancel(*timer_);
  close_socket();
}

void HeartbeatMonitor::start() {
  open_socket();
  ping();
}

void HeartbeatMonitor::open_socket() {
  socket_.emplace(make_kernel_socket(context_, zmq::socket_type::req, info_, limits_));
  socket_->connect(info_.endpoint(info_.hb_port));
  loop_.watch_socket(socket_->handle(), [this] { on_readable(); });
}

void HeartbeatMonitor::close_socket() {
  if (!socket_) return;
  loop_.unwatch_socket(socket_->handle());
  socket_.reset();
}

void HeartbeatMonitor::ping() {
  timer_.reset();
  const std::string payload = "kwd-" + std::to_string(++sequence_);
  sent_ns_ = util::steady_ns();
  sent_wall_ms_ = util::wall_ms();
  outstanding_ = true;
  bool sent = false;
  try {
    sent = socket_->send(zmq::buffer(payload), zmq::send_flags::dontwait).has_value();
  } catch (const zmq::error_t& e) {
    spdlog::debug("heartbeat: send failed: {}", e.what());
  }
  loop_.socket_used(socket_->handle());
  if (!sent) {
    on_deadline();  // a ping that could not leave is a miss, and the socket is renewed
    return;
  }
  timer_ = loop_.after(options_.timeout, [this] {
    timer_.reset();
    // A reply whose wake-up was lost (the loop's sweep of sockets may be seconds apart) is
    // no miss: look before calling it one.
    on_readable();
    if (outstanding_) on_deadline();
  });
}

void HeartbeatMonitor::on_readable() {
  if (!socket_) return;
  zmq::message_t reply;
  bool got = false;
  try {
    // One reply per ping, its frames and no more: a further recv on a REQ socket that has
    // its reply fails with EFSM, and a C++ exception per heartbeat is not free.
    got = recv_through_signals(*socket_, reply, zmq::recv_flags::dontwait).has_value();
    while (got && reply.more())
      recv_through_signals(*socket_, reply, zmq::recv_flags::dontwait);
  } catch (const zmq::error_t& e) {
    spdlog::debug("heartbeat: receive failed: {}", e.what());
  }
  if (!got || !outstanding_) return;
  outstanding_ = false;
  if (timer_) loop_.cancel(*timer_);
  timer_.reset();
  const double rtt_ms = static_cast<double>(util::steady_ns() - sent_ns_) / 1e6;
  record(true, rtt_ms);
  schedule_next_ping();
}

void HeartbeatMonitor::on_deadline() {
  if (!outstanding_) return;
  outstanding_ = false;
  // A REQ socket whose reply never came is stuck in "expecting a reply": start afresh.
  close_socket();
  open_socket();
  record(false, 0);
  schedule_next_ping();
}

void HeartbeatMonitor::reconsider_pace() {
  if (outstanding_ || !timer_ || options_.idle_interval <= options_.interval) return;
  schedule_next_ping();
}

void HeartbeatMonitor::schedule_next_ping() {
  if (timer_) loop_.cancel(*timer_);
  const bool at_rest = options_.idle_interval > options_.interval && consecutive_misses_ == 0 &&
                       at_rest_ && at_rest_();
  const auto interval = at_rest ? options_.idle_interval : options_.interval;
  const std::int64_t due_ns = sent_ns_ + interval.count() * 1'000'000;
  const std::int64_t wait_ms = std::max<std::int64_t>(0, (due_ns - util::steady_ns()) / 1'000'000);
  // Coarse: the pings of a daemon's many kernels leave in one wake-up, and their replies come
  // back close together, instead of each kernel waking the daemon twice a second on its own.
  timer_ = loop_.after(
      std::chrono::milliseconds(wait_ms), [this] { ping(); }, loop::EventLoop::Precision::coarse);
}

void HeartbeatMonitor::record(bool ok, double rtt_ms) {
  history_.push_back({sent_wall_ms_, ok, rtt_ms});
  while (history_.size() > options_.history)
    history_.pop_front();
  if (ok) {
    ++beats_total_;
    last_beat_ms_ = util::wall_ms();
    if (in_hang_) {
      spdlog::warn("kernel answering heartbeats again after {:.1f} s ({} missed): recovered",
                   static_cast<double>(util::wall_ms() - hang_started_ms_) / 1000.0,
                   consecutive_misses_);
      in_hang_ = false;
    }
    answered_once_ = true;
    consecutive_misses_ = 0;
    return;
  }
  ++misses_total_;
  if (!options_.answered_while_busy && busy_ && busy_()) {
    // Its cell is running, and it answers between cells: silence says nothing.
    spdlog::debug("heartbeat: no answer while a cell runs (this kernel answers between cells)");
    consecutive_misses_ = 0;
    return;
  }
  ++consecutive_misses_;
  spdlog::debug("heartbeat: no answer within {} ms ({} in a row)", options_.timeout.count(),
                consecutive_misses_);
  if (in_hang_ || !answered_once_ || options_.misses_to_hang <= 0) return;
  if (consecutive_misses_ < options_.misses_to_hang) return;
  if (alive_ && !alive_()) return;  // dying, not hung: the exit will be reported as such
  in_hang_ = true;
  ++hang_episodes_;
  hang_started_ms_ = last_beat_ms_.value_or(util::wall_ms());
  if (on_hang_) on_hang_(consecutive_misses_);
}

}  // namespace kwd::protocol
