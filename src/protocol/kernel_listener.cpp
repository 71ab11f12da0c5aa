#include "kwd/protocol/kernel_listener.hpp"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "kwd/protocol/content_fields.hpp"
#include "kwd/protocol/dead_stream_drain.hpp"
#include "kwd/protocol/iopub_listener.hpp"
#include "kwd/protocol/port_readiness.hpp"
#include "kwd/stacks/stacks_json.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/wipe.hpp"

namespace kwd::protocol {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

constexpr milliseconds kFilePollInterval{200};
constexpr milliseconds kPortPollInterval{50};
constexpr milliseconds kSlowPortPollInterval{1000};
constexpr milliseconds kSlowestPortPollInterval{10'000};
// A kernel binds within a second or two of its start, but one slow to import (a conda
// environment on NFS, a loaded machine: a CI run's took over 5 s) may take tens of seconds,
// and a client runs its first cell the moment the kernel answers: every IOPub message of
// that cell sent before the subscription is lost for good (its error, its end). So it is
// looked for at 50 ms for 30 s, and at once when the kernel announces a cell; then after
// 1 s, 2 s, 4 s… up to every 10 s (a daemon may watch hundreds of processes whose ports
// never open: a stale connection file, a wedged kernel), said at 30 s.
constexpr std::int64_t kFastPollForMs = 30'000;
// How old a listing of the listening ports a check may use: one listing serves every kernel
// checked within that time. Fresh while a kernel starts; a kernel that has not bound for
// seconds (hundreds of them, for a daemon) can wait a second longer.
constexpr milliseconds kFastPortListingAge{10};
constexpr milliseconds kSlowPortListingAge{1000};
constexpr std::int64_t kSlowBindAfterMs = 30'000;
constexpr milliseconds kReconnectCheck{500};  // libzmq's own reconnect takes ~100 ms
constexpr std::size_t kReceiveBudget = 256;
constexpr std::int64_t kMinEdgeSampleGapNs = 5'000'000;  // per wake-up, so other fds get their turn

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::int64_t ms_since(std::int64_t steady_ns) {
  return (util::steady_ns() - steady_ns) / 1'000'000;
}

}  // namespace

KernelListener::KernelListener(loop::EventLoop& loop, pid_t kernel_pid, std::string connection_file,
                               ListenerOptions options, HangHandler on_hang, CellEdge on_cell_edge)
    : loop_(loop),
      kernel_pid_(kernel_pid),
      path_(std::move(connection_file)),
      options_(options),
      on_hang_(std::move(on_hang)),
      on_cell_edge_(std::move(on_cell_edge)),
      activity_(options.last_cells) {}

KernelListener::~KernelListener() {
  if (poll_timer_) loop_.cancel(*poll_timer_);
  if (reconnect_timer_) loop_.cancel(*reconnect_timer_);
  heartbeat_.reset();
  if (iopub_) {
    loop_.unwatch_socket(iopub_->socket_handle());
    loop_.unwatch_socket(iopub_->monitor_handle());
  }
  iopub_.reset();
  context_.reset();  // every socket is closed by now, with no linger: returns at once
}

void KernelListener::warn_once(const std::string& problem) {
  if (warned_) return;
  warned_ = true;
  spdlog::warn("connection file unusable: {}; watching the process only (no IOPub, no heartbeat)",
               problem);
}

void KernelListener::give_up(const std::string& problem) {
  if (poll_timer_) loop_.cancel(*poll_timer_);
  poll_timer_.reset();
  problem_ = problem;
  warn_once(problem);
}

void KernelListener::start() {
  if (path_.empty()) {
    problem_ = "no connection file on the kernel's command line";
    spdlog::debug("{}: IOPub and heartbeat not watched", problem_);
    return;
  }
  waiting_since_ns_ = util::steady_ns();
  try_load();
}

void KernelListener::try_load() {
  const bool first_attempt = !poll_timer_.has_value();
  const bool past_deadline = ms_since(waiting_since_ns_) >= options_.connection_file_wait.count();
  std::string problem;
  bool kernel_may_write_it = false;  // missing, or ports not chosen: normal while it starts
  std::optional<std::string> text;
  bool exists = false;
  try {
    if (options_.read_connection_file) {
      text = options_.read_connection_file(path_);
      exists = text.has_value();
    } else {
      exists = file_exists(path_);
    }
  } catch (const ConnectionFileError& e) {
    exists = true;
    problem = e.what();
  }
  if (!exists) {
    problem = path_ + ": does not exist";
    kernel_may_write_it = true;
  } else if (problem.empty()) {
    try {
      ConnectionInfo info = text ? parse_connection_info(*text) : load_connection_file(path_);
      if (info.ports_known()) {
        info_ = std::move(info);
      } else {
        problem = path_ + ": iopub_port or hb_port is 0 (not chosen yet)";
        kernel_may_write_it = true;
      }
    } catch (const ConnectionFileError& e) {
      problem = text ? path_ + ": " + e.what() : std::string(e.what());
    }
    if (text) util::wipe(text->data(), text->size());  // it holds the key
  }
  if (!info_) {
    problem_ = problem;
    // A broken file is said at once; a missing one, or one without ports, is what a kernel
    // that picks its own ports starts from, and is only a problem if it stays that way.
    if (first_attempt && !kernel_may_write_it) warn_once(problem);
    if (past_deadline) {
      give_up(problem + " (waited " + std::to_string(options_.connection_file_wait.count() / 1000) +
              " s)");
      return;
    }
    // ipykernel rewrites the file once it has bound its ports (filling in missing ones), so
    // it is read again until then.
    if (!poll_timer_) poll_timer_ = loop_.every(kFilePollInterval, [this] { try_load(); });
    return;
  }

  if (warned_) {
    spdlog::info("connection file {} is usable now (it was not: {}); listening to the kernel",
                 path_, problem_);
    recovered_problem_ = problem_;
  }
  problem_.clear();
  if (poll_timer_) loop_.cancel(*poll_timer_);
  poll_timer_.reset();
  spdlog::debug("connection file read: {} transport, {}, {}signed{}", info_->transport_name(),
                info_->signature_scheme, info_->key.empty() ? "un" : "",
                info_->curve ? ", CurveZMQ" : "");
  try {
    if (!context_) context_ = std::make_shared<zmq::context_t>(1);
  } catch (const zmq::error_t& e) {
    info_.reset();
    give_up(std::string("cannot create a ZeroMQ context: ") + e.what());
    return;
  }
  waiting_since_ns_ = util::steady_ns();
  polling_slowly_ = false;
  slow_poll_interval_ = milliseconds(0);
  poll_timer_ = loop_.every(kPortPollInterval, [this] { poll_ports(); });
  poll_ports();
}

std::vector<std::string> KernelListener::notes() const {
  std::vector<std::string> notes;
  if (!problem_.empty() && !path_.empty())
    notes.push_back("connection file unusable: " + problem_ +
                    "; IOPub and heartbeat were not watched");
  if (!recovered_problem_.empty())
    notes.push_back("connection file was unusable at first (" + recovered_problem_ +
                    "); listened to the kernel once it was rewritten");
  if (!heartbeat_problem_.empty()) notes.push_back("heartbeat not watched: " + heartbeat_problem_);
  for (const std::string* held : {&iopub_port_held_, &heartbeat_port_held_})
    if (!held->empty()) notes.push_back(*held + "; not watched there");
  return notes;
}

bool KernelListener::connect_where_listening(milliseconds listing_age) {
  if (!iopub_ && !fed_by_client() && problem_.empty() &&
      kernel_listens(info_->iopub_port, "IOPub", iopub_port_held_, listing_age))
    connect_iopub();
  if (!heartbeat_ && !heartbeat_failed_ && problem_.empty() &&
      kernel_listens(info_->hb_port, "heartbeat", heartbeat_port_held_, listing_age))
    connect_heartbeat();
  const bool done = (iopub_ || fed_by_client()) && (heartbeat_ || heartbeat_failed_);
  if (done || !problem_.empty()) {
    if (poll_timer_) loop_.cancel(*poll_timer_);
    poll_timer_.reset();
    return true;
  }
  return false;
}

void KernelListener::poll_ports() {
  if (!info_ || !context_) return;
  if (connect_where_listening(polling_slowly_ ? kSlowPortListingAge : kFastPortListingAge)) return;
  const std::int64_t waited_ms = ms_since(waiting_since_ns_);
  if (waited_ms >= kFastPollForMs && slow_poll_interval_ < kSlowestPortPollInterval) {
    slow_poll_interval_ = polling_slowly_
                              ? std::min(slow_poll_interval_ * 2, kSlowestPortPollInterval)
                              : kSlowPortPollInterval;
    polling_slowly_ = true;
    loop_.cancel(*poll_timer_);
    poll_timer_ = loop_.every(
        slow_poll_interval_, [this] { poll_ports(); }, loop::EventLoop::Precision::coarse);
  }
  if (!warned_slow_bind_ && waited_ms >= kSlowBindAfterMs) {
    warned_slow_bind_ = true;
    spdlog::warn("the kernel has not bound its {} port after {} s; still waiting to connect",
                 iopub_ || fed_by_client() ? "heartbeat" : "IOPub", kSlowBindAfterMs / 1000);
  }
}

bool KernelListener::kernel_listens(int port, const char* channel, std::string& held_note,
                                    milliseconds listing_age) {
  PortState state = port_state(kernel_pid_, *info_, path_, port, listing_age);
  // A listing up to listing_age old may predate the kernel's own bind: asked afresh first.
  if (state == PortState::held_by_another && held_note.empty())
    state = port_state(kernel_pid_, *info_, path_, port);
  if (state == PortState::held_by_another && held_note.empty()) {
    held_note = channel + std::string(" port ") + std::to_string(port) +
                " was held by another kernel's process";
    spdlog::warn(
        "the kernel's {} port {} is held by another kernel's process, not by this kernel "
        "(pid {}) or its children; not connecting there until this kernel listens on it",
        channel, port, kernel_pid_);
  }
  const bool connect = may_connect(state);
  if (connect && !held_note.empty()) {
    if (state == PortState::listening)
      spdlog::info("the kernel now listens on its {} port {}; connecting", channel, port);
    else
      spdlog::info("the kernel's {} port {} is no longer held by another kernel; connecting",
                   channel, port);
    held_note.clear();
  }
  return connect;
}

void KernelListener::connect_iopub() {
  try {
    MessageDecoder decoder(MessageSigner(info_->signature_scheme, info_->key), options_.limits);
    iopub_ = std::make_unique<IopubListener>(*context_, *info_, std::move(decoder),
                                             [this](const Message& m) { on_message(m); });
  } catch (const std::exception& e) {
    give_up(std::string("cannot listen on IOPub: ") + e.what());
    return;
  }
  if (iopub_since_ns_ == 0) iopub_since_ns_ = util::steady_ns();
  loop_.watch_socket(iopub_->socket_handle(), [this] { iopub_->receive(kReceiveBudget); });
  loop_.watch_socket(iopub_->monitor_handle(), [this] { on_iopub_events(); });
  spdlog::debug("listening on IOPub at {}", info_->endpoint(info_->iopub_port));
}

void KernelListener::on_cell_announced(std::int64_t execution_count, const std::string& code,
                                       bool truncated, std::int64_t at_ms) {
  if (draining_) return;
  // A kernel running a cell listens on its ports: subscribe now, not at the next look, so
  // that this cell's output and end are heard.
  if (poll_timer_ && info_ && context_) connect_where_listening(kFastPortListingAge);
  const std::int64_t now_ms = util::wall_ms();
  if (at_ms <= 0 || at_ms > now_ms) at_ms = now_ms;
  // A cell's edge, like its busy on IOPub: its memory at start is taken now, if now is still
  // its start (announcements are read in batches; a late one leaves that to IOPub's busy).
  constexpr std::int64_t kStillItsStartMs = 5;
  if (on_cell_edge_ && now_ms - at_ms <= kStillItsStartMs) {
    last_edge_sample_ns_ = util::steady_ns();
    on_cell_edge_(true, true, now_ms);
  }
  activity_.on_cell_announced(execution_count, code, truncated, at_ms);
}

bool KernelListener::iopub_silent_for(std::chrono::milliseconds quiet) const {
  if (!iopub_ || iopub_since_ns_ == 0) return false;
  const std::int64_t since = std::max(iopub_since_ns_, last_message_ns_);
  return util::steady_ns() - since >= std::chrono::nanoseconds(quiet).count();
}

void KernelListener::on_message(const Message& m) {
  last_message_ns_ = util::steady_ns();
  // busy/idle around an execute_request are a cell's edges: sample before the cell's RSS
  // at start (or end) is taken. A flood of tiny executions is sampled at most every 5 ms.
  // Not while draining after the kernel's death: there is nothing left to sample.
  if (on_cell_edge_ && !draining_ && m.msg_type == "status" &&
      m.parent_msg_type == "execute_request") {
    const std::int64_t now = util::steady_ns();
    const bool sample = now - last_edge_sample_ns_ >= kMinEdgeSampleGapNs;
    if (sample) last_edge_sample_ns_ = now;
    on_cell_edge_(text_field(m.content, "execution_state") == "busy", sample,
                  KernelActivity::made_at(m, util::wall_ms()));
  }
  activity_.on_message(m, util::wall_ms());
  // A kernel at rest is pinged seldom (idle_interval); once it is busy, at the interval again.
  if (heartbeat_ && !draining_ && m.msg_type == "status" &&
      text_field(m.content, "execution_state") == "busy")
    heartbeat_->reconsider_pace();
}

void KernelListener::on_iopub_message(const Message& message) {
  ++fed_messages_;
  on_message(message);
}

void KernelListener::on_iopub_events() {
  iopub_->on_monitor_events();
  if (iopub_->connection_lost() && !reconnect_timer_)
    reconnect_timer_ = loop_.after(kReconnectCheck, [this] { check_iopub_connection(); });
}

void KernelListener::check_iopub_connection() {
  reconnect_timer_.reset();
  if (!iopub_ || !iopub_->connection_lost()) return;  // libzmq reconnected by itself
  // Only towards a port that is listening again (see port_readiness.hpp for why); a kernel
  // that is going away will be reaped before it matters.
  if (may_connect(port_state(kernel_pid_, *info_, path_, info_->iopub_port))) {
    spdlog::info("iopub: connection lost and not restored by libzmq; reconnecting");
    try {
      iopub_->reconnect();
    } catch (const zmq::error_t& e) {
      spdlog::warn("iopub: cannot reconnect: {}", e.what());
      return;
    }
    loop_.socket_used(iopub_->socket_handle());
  }
  reconnect_timer_ = loop_.after(kReconnectCheck, [this] { check_iopub_connection(); });
}

void KernelListener::connect_heartbeat() {
  try {
    const pid_t pid = kernel_pid_;
    heartbeat_ = std::make_unique<HeartbeatMonitor>(
        *context_, loop_, *info_, options_.limits, options_.heartbeat,
        [pid] { return hang::process_alive(pid); }, [this](int n) { on_hang(n); },
        options_.kernel_at_rest,
        [this, pid] {
          // A stopped kernel answers nothing, busy or not: its silence counts.
          return activity_.execution_state() == "busy" && !hang::process_stopped(pid);
        });
    heartbeat_->start();
  } catch (const std::exception& e) {
    heartbeat_.reset();
    spdlog::warn("cannot ping the kernel's heartbeat: {}; no hang detection", e.what());
    heartbeat_problem_ = e.what();
    heartbeat_failed_ = true;  // IOPub goes on without it
  }
}

void KernelListener::on_hang(int consecutive_misses) {
  HangEvidence evidence;
  evidence.detected_at_ms = util::wall_ms();
  evidence.consecutive_misses = consecutive_misses;
  evidence.process = hang::snapshot_process(kernel_pid_);
  if (evidence.process.available) {
    // Where it is stuck, before anyone interrupts it. Bounded: the loop waits for this.
    stacks::CaptureOptions capture;
    capture.python_budget = std::chrono::milliseconds(500);
    capture.native_budget = std::chrono::milliseconds(2000);
    try {
      evidence.stacks = stacks::capture_stacks(kernel_pid_, capture);
    } catch (const std::exception& e) {  // the hang is reported without them
      spdlog::warn("kernel {}: no stacks for the hang report: {}", kernel_pid_, e.what());
    }
  }
  spdlog::warn("kernel {} has missed {} heartbeats in a row while alive ({}): hung", kernel_pid_,
               consecutive_misses,
               evidence.process.available ? evidence.process.process_state : "state unknown");
  hang_ = std::move(evidence);
  if (on_hang_) on_hang_(*hang_);
}

void KernelListener::on_memory_sample(const timeline::MemorySample& sample) {
  activity_.on_memory_sample(sample);
}

void KernelListener::drain(milliseconds quiet, milliseconds budget) {
  if (fed_by_client()) {
    draining_ = true;
    options_.client_iopub_drain(quiet, budget);
    return;
  }
  if (!iopub_) return;
  draining_ = true;
  drain_dead_stream({iopub_->socket_handle(), iopub_->monitor_handle(),
                     [this] {
                       iopub_->on_monitor_events();  // the state as libzmq last told it
                       return iopub_->connected();
                     },
                     [this] {
                       while (iopub_->receive(4096) > 0) {
                       }
                     }},
                    quiet, budget);
}

void KernelListener::contribute(json& report, std::int64_t at_ms, bool with_hang) const {
  report["execution"] = activity_.to_json(at_ms);

  auto& p = report["protocol"];
  const bool ok = info_.has_value() && problem_.empty();
  p["connection_file"] = {{"ok", ok}, {"problem", ok ? json(nullptr) : json(problem_)}};
  p["transport"] = info_ ? json(info_->transport_name()) : json(nullptr);
  p["signature_scheme"] = info_ ? json(info_->signature_scheme) : json(nullptr);
  p["signed"] = info_ ? json(!info_->key.empty()) : json(nullptr);
  p["curve"] = info_ && info_->curve.has_value();
  // Fed by a client: its socket is the one that connected, and it counts its own drops.
  p["iopub_connected"] = fed_by_client() ? fed_messages_ > 0 : iopub_ && iopub_->connected();
  p["messages_seen"] = fed_by_client() ? fed_messages_ : iopub_ ? iopub_->messages_seen() : 0;
  if (fed_by_client()) p["iopub_received_by"] = "the smoke client";
  const DropCounts* dropped = iopub_                          ? &iopub_->dropped()
                              : options_.client_iopub_dropped ? options_.client_iopub_dropped()
                                                              : nullptr;
  p["dropped"] = dropped != nullptr ? dropped->to_json() : json::object();
  p["disconnects"] = iopub_ ? iopub_->disconnects() : 0;
  p["handshake_failures"] = iopub_ ? iopub_->handshake_failures() : 0;
  p["reconnects"] = iopub_ ? iopub_->reconnects() : 0;

  auto& h = report["heartbeat"];
  const auto& ho = heartbeat_ ? heartbeat_->options() : options_.heartbeat;
  h["interval_ms"] = ho.interval.count();
  h["idle_interval_ms"] = std::max(ho.idle_interval, ho.interval).count();
  h["timeout_ms"] = ho.timeout.count();
  h["misses_to_hang"] = ho.misses_to_hang;
  h["answered_while_busy"] = ho.answered_while_busy;
  h["watched"] = heartbeat_ != nullptr;
  h["consecutive_misses"] = heartbeat_ ? heartbeat_->consecutive_misses() : 0;
  h["misses_total"] = heartbeat_ ? heartbeat_->misses_total() : 0;
  h["beats_total"] = heartbeat_ ? heartbeat_->beats_total() : 0;
  const auto last = heartbeat_ ? heartbeat_->last_beat_ms() : std::nullopt;
  h["last_beat_ms"] = last ? json(*last) : json(nullptr);
  h["hang_episodes"] = heartbeat_ ? heartbeat_->hang_episodes() : 0;
  auto& history = h["history"] = json::array();
  if (heartbeat_)
    for (const Beat& b : heartbeat_->history())
      history.push_back(
          {{"t_ms", b.t_ms}, {"ok", b.ok}, {"rtt_ms", b.ok ? json(b.rtt_ms) : json(nullptr)}});

  if (with_hang && hang_) {
    const auto& ev = *hang_;
    auto threads = json::array();
    for (const auto& t : ev.process.threads)
      threads.push_back({{"tid", t.tid}, {"name", t.name}, {"state", t.state}, {"wchan", t.wchan}});
    report["hang"] = {
        {"detected_at_ms", ev.detected_at_ms},
        {"consecutive_misses", ev.consecutive_misses},
        {"process_state", ev.process.available ? json(ev.process.process_state) : json(nullptr)},
        {"threads", std::move(threads)},
        {"threads_total", ev.process.threads_total},
        {"reason", ev.process.available ? json(nullptr) : json(ev.process.reason)},
        {"stacks", ev.stacks ? stacks::to_json(*ev.stacks) : json(nullptr)}};
  }
}

}  // namespace kwd::protocol
