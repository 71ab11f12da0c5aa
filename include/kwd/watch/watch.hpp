#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kwd/loop/event_loop.hpp"
#include "kwd/probes/probe.hpp"
#include "kwd/probes/process_identity.hpp"
#include "kwd/protocol/kernel_listener.hpp"
#include "kwd/timeline/clock_steps.hpp"
#include "kwd/timeline/timeline.hpp"
#include "kwd/util/byte_ring.hpp"
#include "kwd/watch/death_source.hpp"

namespace kwd::watch {

struct WatchOptions {
  pid_t kernel_pid = -1;
  std::string connection_file;    // empty: no IOPub or heartbeat, the process alone is watched
  std::string mode = "launcher";  // report field watchdog.mode: launcher | daemon | smoke
  std::vector<std::string> kernel_argv;
  // The notebook as the front end knows it (the kernel's JPY_SESSION_NAME); the connection
  // file's jupyter_session, once read, comes first.
  probes::KernelNotebook notebook;
  std::chrono::milliseconds sample_interval{100};
  // While the kernel is idle (IOPub says so) and its memory flat, samples come this often
  // instead: an idle kernel costs almost nothing, and a busy or growing one is sampled at the
  // full rate. Cell edges, stderr writes and a dying kernel are sampled at once either way.
  std::chrono::milliseconds idle_sample_interval{1000};
  // The first sample: at start (0), or this much later. The daemon spreads the first samples
  // of kernels it finds together (a server restoring fifty sessions), so that the next ones
  // are found before all those readings are made, and no one tick makes all of them.
  std::chrono::milliseconds first_sample_after{0};
  // When the kernel process started (wall clock), when it was before the watch: the daemon
  // finds kernels that have run for hours. Unset: as the watch starts (`run` launches it).
  std::optional<std::int64_t> kernel_started_at_ms;
  std::chrono::seconds full_rate_window{120};
  protocol::ListenerOptions listener;
  probes::ProbeOptions probes;  // kernel_pid is filled in from kernel_pid
  // Shared with the process's other watches (the daemon's: one ZeroMQ I/O thread for all);
  // null: the listener makes its own.
  std::shared_ptr<zmq::context_t> zmq_context;
  bool fingerprint = true;
  // Whether the connection file is there, asked at the first sign of the death (a manager
  // removes it as it ends the kernel); nullopt: not known. Unset: lstat on the loop (`run`,
  // whose kernel's file is its own); the daemon asks off its loop (daemon/off_loop_read.hpp).
  std::function<std::optional<bool>()> connection_file_present;
  // A collector (a section of the report) that takes longer than this is named under the
  // report's `problems`; the report is written all the same.
  std::chrono::milliseconds collector_budget{200};
};

// What a front end adds to a report: what only it knows.
struct ReportContext {
  const ProcessEnd* end = nullptr;             // null for a hang report (the kernel is alive)
  std::int64_t at_ms = 0;                      // death, or hang detection
  std::vector<std::string> watchdog_received;  // signals the watchdog itself was sent
  bool faulthandler = false;
  // The kernel tells the watchdog of each cell before running it (the shim's cell pipe):
  // without it a cell is known only from IOPub, which a kernel crashing at once never sends.
  bool cell_announcements = false;
  // Whether the shim the kernel was given ran in it (nullopt: none given, or no way to tell),
  // and, when it did not, why (its argv's own words, or a general reason).
  std::optional<bool> python_shim_ran;
  std::string python_shim_why_not;
  std::vector<std::string> notes;
  // Sections only the front end knows, added to the report as they are (the node daemon's
  // "kubernetes": the kernel's pod and container).
  nlohmann::json sections = nlohmann::json::object();
};

// One watched kernel: its listeners (IOPub, heartbeat), probes, memory timeline and stderr
// tail, on the caller's event loop, and one death event. The front ends compose it: `run`
// with a child it launched, the daemon with kernels it found. It decides nothing about
// whether a death was a crash (that is the front end's policy and the diagnosis's job); it
// gathers the facts.
class Watch {
 public:
  // The process has ended and what it published last has been read.
  using DeathHandler = std::function<void(const ProcessEnd&, std::int64_t died_at_ms)>;
  using HangHandler = std::function<void(const protocol::HangEvidence&)>;

  Watch(loop::EventLoop& loop, WatchOptions options, std::unique_ptr<DeathSource> death,
        DeathHandler on_death, HangHandler on_hang);
  ~Watch();
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

  // Probes, listeners and timers; never throws (what cannot be watched is said once).
  void start();
  // Adds probes beyond the platform's (tests: probes that fail on purpose).
  void add_probe(std::unique_ptr<probes::Probe> probe);
  // The owner's stderr capture of the kernel, when it has one; it must outlive the Watch.
  void set_stderr_tail(const util::ByteRing* tail) { stderr_tail_ = tail; }
  // Runs before each memory sample: the launcher reads the cells the kernel announced since
  // the last one there, in a wake-up the watch has anyway, not in one of its own per cell.
  void set_before_sample(std::function<void()> hook) { before_sample_ = std::move(hook); }
  // Runs after each memory sample, with it (the launcher's thrash guard). It may end the
  // kernel; the death is then seen as any other.
  void set_after_sample(std::function<void(const timeline::MemorySample&)> hook) {
    after_sample_ = std::move(hook);
  }
  // Takes a memory sample now (besides the timer's): a cell edge, a write on stderr.
  void sample_now();
  // The kernel has begun to die but still lives (faulthandler is writing its dump): the
  // probes read what only a live process shows, and one more sample is taken.
  void kernel_dying();
  // The kernel said (through the shim, before running it) that cell `execution_count`
  // starts: the report knows the cell even if IOPub never says.
  // `at_ms`: when the cell started (epoch ms), as the kernel said; 0: now.
  void cell_announced(std::int64_t execution_count, const std::string& code, bool truncated,
                      std::int64_t at_ms = 0);
  // An IOPub message the caller's own client received, when the watch was told not to
  // subscribe itself (WatchOptions::listener.client_iopub_drain).
  void iopub_message(const protocol::Message& message);
  // Asks the death source (a parent's SIGCHLD says when); calls the death handler once.
  void check_death();
  // The notebook, learnt after the start (the daemon asks the Jupyter server); the
  // connection file's jupyter_session still comes first.
  void set_notebook(probes::KernelNotebook notebook) { options_.notebook = std::move(notebook); }
  [[nodiscard]] const probes::KernelNotebook& notebook() const { return options_.notebook; }

  [[nodiscard]] pid_t pid() const { return options_.kernel_pid; }
  [[nodiscard]] bool shutdown_requested() const;
  // Whether the connection file was still there when the death was first seen (nullopt: no
  // file, or no death yet). A manager that stops a kernel deletes it only after that.
  [[nodiscard]] std::optional<bool> connection_file_at_death() const {
    return connection_file_at_death_;
  }
  [[nodiscard]] std::int64_t started_at_ms() const { return started_at_ms_; }
  [[nodiscard]] std::int64_t kernel_started_at_ms() const {
    return options_.kernel_started_at_ms.value_or(started_at_ms_);
  }
  [[nodiscard]] std::int64_t last_sample_ns() const { return last_sample_ns_; }
  [[nodiscard]] const timeline::Timeline& timeline() const { return timeline_; }
  [[nodiscard]] const protocol::KernelListener* listener() const { return listener_.get(); }

  // The report document of the death or hang in `context`, diagnosis included. Each
  // section is gathered on its own: one that throws or overruns its budget is named under
  // `problems` and the rest is kept. Never throws.
  nlohmann::json build_report(const ReportContext& context, const std::string& id);
  // What the probes know of the live kernel now, as their report sections (the OOM records
  // of its processes, its /dev/shm, its fingerprint...), each probe caught up with its
  // source first: what a front end reads to explain a failed cell. Never throws.
  nlohmann::json live_facts();

 private:
  void on_sample_tick();
  // A cell started or ended (KernelListener::CellEdge): the probes hear of it first.
  void cell_edge(bool running, bool sample, std::int64_t at_ms);
  // The timer's tick: a sample, then the next one at the rate the kernel's state calls for.
  void on_sample_timer();
  [[nodiscard]] bool needs_full_rate(std::int64_t now_ms) const;
  void on_death_fd();
  // Records connection_file_at_death_, once, at the first sign of the death.
  void note_connection_file();
  void finish(const ProcessEnd& end);

  loop::EventLoop& loop_;
  WatchOptions options_;
  std::unique_ptr<DeathSource> death_;
  DeathHandler on_death_;
  HangHandler on_hang_;
  probes::ProbeList probes_;
  timeline::Timeline timeline_;
  timeline::ClockSteps clock_steps_;
  const util::ByteRing* stderr_tail_ = nullptr;
  std::function<void()> before_sample_;
  std::function<void(const timeline::MemorySample&)> after_sample_;
  std::int64_t started_at_ms_ = 0;
  std::int64_t last_sample_ns_ = 0;
  // The RSS that memory is "flat" around, and when it last moved away from it.
  std::int64_t flat_rss_ = -1;
  std::int64_t rss_moved_at_ms_ = 0;
  bool started_ = false;
  bool dead_ = false;
  std::optional<bool> connection_file_at_death_;
  std::optional<loop::EventLoop::TimerId> sample_timer_;
  std::optional<loop::EventLoop::TimerId> death_retry_timer_;
  // IOPub + heartbeat; declared last (it unregisters from the loop when destroyed).
  std::unique_ptr<protocol::KernelListener> listener_;
};

}  // namespace kwd::watch
