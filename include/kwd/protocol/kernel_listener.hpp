#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kwd/hang/thread_snapshot.hpp"
#include "kwd/loop/event_loop.hpp"
#include "kwd/protocol/connection_file.hpp"
#include "kwd/protocol/heartbeat_monitor.hpp"
#include "kwd/protocol/kernel_activity.hpp"
#include "kwd/protocol/listener_options.hpp"
#include "kwd/protocol/wire.hpp"
#include "kwd/stacks/stacks.hpp"
#include "kwd/timeline/memory_sample.hpp"

namespace zmq {
class context_t;
}

namespace kwd::protocol {

class IopubListener;

// A hang as detected: the heartbeat stopped while the process lives.
struct HangEvidence {
  std::int64_t detected_at_ms = 0;
  int consecutive_misses = 0;
  hang::ProcessSnapshot process;
  // Every thread's stack, taken when the hang was detected; nullopt when not asked for.
  std::optional<stacks::ProcessStacks> stacks;
};

// The watchdog as a read-only participant of the Jupyter protocol, for one kernel: reads the
// connection file, waits for the kernel to bind its ports, then listens on IOPub (SUB) and
// pings the heartbeat (REQ). It never sends on shell or control. Every problem degrades to
// "not listening" with one warning; the process is supervised regardless (fail open).
class KernelListener {
 public:
  using HangHandler = std::function<void(const HangEvidence&)>;
  // A cell started (`running`) or ended, at `at_ms` by the kernel's clock. With `sample`, a
  // memory sample is to be taken now (and handed to on_memory_sample()), so that the cell's
  // memory delta is measured at its edges, not up to one sampling interval away (where it
  // would be charged to its neighbour); without, an edge was sampled a moment ago.
  using CellEdge = std::function<void(bool running, bool sample, std::int64_t at_ms)>;

  // `connection_file` may be empty (a command line without one): nothing is listened to.
  KernelListener(loop::EventLoop& loop, pid_t kernel_pid, std::string connection_file,
                 ListenerOptions options, HangHandler on_hang, CellEdge on_cell_edge = {});
  ~KernelListener();
  KernelListener(const KernelListener&) = delete;
  KernelListener& operator=(const KernelListener&) = delete;

  // Reads the connection file and starts waiting for the ports. Never throws.
  void start();
  // Its ports have not opened in the first seconds: a stale connection file or a wedged
  // kernel, whose IOPub will not say when it is idle.
  [[nodiscard]] bool ports_slow_to_open() const {
    return polling_slowly_ && !iopub_ && !fed_by_client();
  }
  // Before start(): the ZeroMQ context of the process's other listeners (the daemon's), so
  // that a hundred kernels share one I/O thread; without it the listener makes its own.
  void share_context(std::shared_ptr<zmq::context_t> context) { context_ = std::move(context); }
  void on_memory_sample(const timeline::MemorySample& sample);
  // The connection file's jupyter_session ("" before it is read, or when it has none).
  [[nodiscard]] std::string jupyter_session() const {
    return info_ ? info_->jupyter_session : std::string();
  }
  // An IOPub message a client of the kernel's received (ListenerOptions::client_iopub_drain).
  void on_iopub_message(const Message& message);
  // The kernel itself announced a cell (see KernelActivity::on_cell_announced).
  // `at_ms`: when it started (epoch ms), 0: now.
  void on_cell_announced(std::int64_t execution_count, const std::string& code, bool truncated,
                         std::int64_t at_ms = 0);
  // The kernel has died: reads what it published last (a shutdown_reply, the last outputs),
  // waiting until IOPub has been quiet for `quiet` or `budget` has passed.
  void drain(std::chrono::milliseconds quiet, std::chrono::milliseconds budget);

  // IOPub listened to for `quiet` and silent all that time: a kernel found after it last said
  // its state (by a daemon started after it went idle) is at rest as far as anyone can tell.
  [[nodiscard]] bool iopub_silent_for(std::chrono::milliseconds quiet) const;
  [[nodiscard]] bool shutdown_requested() const { return activity_.shutdown_requested(); }
  [[nodiscard]] const KernelActivity& activity() const { return activity_; }
  [[nodiscard]] const std::optional<HangEvidence>& current_hang() const { return hang_; }
  // What could not be done, for the report's notes.
  [[nodiscard]] std::vector<std::string> notes() const;

  // Adds `execution`, `protocol` and `heartbeat` (and `hang` when `with_hang` and a hang
  // is current) to a report being assembled at `at_ms`.
  void contribute(nlohmann::json& report, std::int64_t at_ms, bool with_hang) const;

 private:
  void try_load();
  void poll_ports();
  // Connects IOPub and the heartbeat where the kernel listens; true once nothing is left to
  // look for.
  bool connect_where_listening(std::chrono::milliseconds listing_age);
  // Whether the kernel itself now listens on `port` (or whose it is cannot be told); says once
  // when another kernel holds it, and when that has ended.
  // `held_note` is that channel's: set while another kernel holds the port.
  bool kernel_listens(int port, const char* channel, std::string& held_note,
                      std::chrono::milliseconds listing_age);
  void connect_iopub();
  void connect_heartbeat();
  void on_iopub_events();
  void check_iopub_connection();
  void give_up(const std::string& problem);
  void warn_once(const std::string& problem);
  void on_hang(int consecutive_misses);
  void on_message(const Message& message);
  [[nodiscard]] bool fed_by_client() const { return bool(options_.client_iopub_drain); }

  loop::EventLoop& loop_;
  pid_t kernel_pid_;
  std::string path_;
  ListenerOptions options_;
  HangHandler on_hang_;
  CellEdge on_cell_edge_;
  std::int64_t last_edge_sample_ns_ = 0;
  bool draining_ = false;  // the kernel is dead: reading its last words only

  std::optional<ConnectionInfo> info_;
  std::string problem_;            // why the connection file is not used ("" when it is)
  std::string recovered_problem_;  // what was wrong with it before the kernel rewrote it
  std::string heartbeat_problem_;
  bool warned_ = false;
  std::int64_t waiting_since_ns_ = 0;
  bool warned_slow_bind_ = false;
  // Set while another kernel holds this kernel's IOPub (heartbeat) port: said once in the log,
  // and in the report's notes if it never ends.
  std::string iopub_port_held_;
  std::string heartbeat_port_held_;
  bool polling_slowly_ = false;
  std::chrono::milliseconds slow_poll_interval_{0};
  std::optional<loop::EventLoop::TimerId> poll_timer_;
  std::optional<loop::EventLoop::TimerId> reconnect_timer_;

  std::shared_ptr<zmq::context_t> context_;
  std::unique_ptr<IopubListener> iopub_;
  std::uint64_t fed_messages_ = 0;    // handed on by the client, when fed_by_client()
  std::int64_t iopub_since_ns_ = 0;   // steady clock: when IOPub was first listened to
  std::int64_t last_message_ns_ = 0;  // steady clock: the last message read
  std::unique_ptr<HeartbeatMonitor> heartbeat_;
  bool heartbeat_failed_ = false;

  KernelActivity activity_;
  std::optional<HangEvidence> hang_;
};

}  // namespace kwd::protocol
