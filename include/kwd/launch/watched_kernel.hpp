#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kwd/faulthandler/python_shim.hpp"
#include "kwd/launch/child_process.hpp"
#include "kwd/launch/fault_channel.hpp"
#include "kwd/launch/stderr_tee.hpp"
#include "kwd/loop/event_loop.hpp"
#include "kwd/platform/memory_limit.hpp"
#include "kwd/probes/host_sources.hpp"
#include "kwd/protocol/listener_options.hpp"
#include "kwd/stacks/crash.hpp"
#include "kwd/stacks/system_crash_report.hpp"
#include "kwd/util/unique_fd.hpp"
#include "kwd/watch/last_words.hpp"
#include "kwd/watch/report_writer.hpp"
#include "kwd/watch/thrash_guard.hpp"
#include "kwd/watch/watch.hpp"

namespace kwd::launch {

// How to start and watch one kernel that is our child.
struct KernelLaunch {
  std::vector<std::string> argv;
  std::string connection_file;                 // resolved path; empty: the process alone is watched
  std::string mode = "launcher";               // the report's watchdog.mode
  std::string working_dir;                     // empty: ours
  std::vector<std::string> extra_environment;  // "NAME=value", over ours
  // `run` passes the kernel's stderr through to its own (the contract); `smoke` keeps it for
  // the report only, and its stdout with it (a terminal of many kernels is no place for it).
  bool passthrough = true;
  // `smoke`: the kernel leads a process group of its own, as jupyter_client starts kernels, so
  // that ending it (a timeout, a hang, the run's end) ends its DataLoader workers and pools,
  // stopped ones too; what is left of the group when this is destroyed is killed. `run` keeps
  // the kernel in the watchdog's group: the manager signals that group and must reach both.
  bool own_process_group = false;
  std::size_t stderr_buffer_bytes = 256 * 1024;
  std::chrono::milliseconds sample_interval{100};
  std::chrono::seconds full_rate_window{120};
  protocol::ListenerOptions listener;         // IOPub and heartbeat
  std::optional<std::uint64_t> memory_limit;  // a memory cgroup of its own with this limit
  // Under that limit: a kernel that thrashes at it this long is ended (watch/thrash_guard.hpp);
  // 0: never.
  std::chrono::seconds thrash_timeout{30};
  std::string nvml_library;  // empty: default search
  std::chrono::milliseconds gpu_interval{500};
  // The kernel log, NVML and meminfo readers, shared with the caller's other kernels
  // (`smoke -j`); null: this kernel's probes make their own.
  std::shared_ptr<probes::HostSources> host_sources;
  bool faulthandler = true;  // the sitecustomize shim and PYTHONFAULTHANDLER
  // After a death, a notice for the restarted kernel's first cell (launch/death_notice.hpp);
  // shown through the shim, so only with faulthandler.
  bool death_notices = false;
};

// One kernel started as our child with everything a crash report needs around it: its
// stderr captured, the faulthandler shim, the memory cgroup, the dying library's last
// words, and a Watch on the caller's loop. What to do about a death (mirror it, fail a
// cell) is the front end's; this only tells it, with the facts, and writes the report.
class WatchedKernel {
 public:
  using DeathHandler = std::function<void(const watch::ProcessEnd&, std::int64_t died_at_ms)>;
  using HangHandler = std::function<void(const protocol::HangEvidence&)>;

  WatchedKernel(loop::EventLoop& loop, KernelLaunch launch);
  ~WatchedKernel();
  WatchedKernel(const WatchedKernel&) = delete;
  WatchedKernel& operator=(const WatchedKernel&) = delete;

  // Starts the kernel and its watch. Throws SpawnError when it cannot be started. The death
  // handler runs once, after the kernel's last output was read.
  void start(DeathHandler on_death, HangHandler on_hang);
  // A SIGCHLD arrived: asks the death source (calls the death handler if it was ours).
  void check_death();

  [[nodiscard]] pid_t pid() const { return child_ ? child_->pid() : -1; }
  [[nodiscard]] bool started() const { return child_.has_value(); }
  [[nodiscard]] bool dead() const { return dead_; }
  bool send_signal(int signal) const;
  [[nodiscard]] bool shutdown_requested() const;
  [[nodiscard]] const watch::Watch& watch() const { return *watch_; }
  [[nodiscard]] watch::Watch& watch() { return *watch_; }
  // An IOPub message of the caller's client (LaunchOptions::listener.client_iopub_drain).
  void iopub_message(const protocol::Message& message) {
    if (watch_) watch_->iopub_message(message);
  }
  [[nodiscard]] const util::ByteRing& stderr_tail() const { return stderr_->tail(); }
  // Called after each memory sample (a cell's edges take one too); set before start().
  void set_sample_observer(std::function<void()> observer) {
    sample_observer_ = std::move(observer);
  }
  // What the watchdog could not do for this kernel; said in its report too.
  void add_note(std::string note) { notes_.push_back(std::move(note)); }

  // Builds and stores the crash (`end` set) or hang (`end` null) report in `report_dir`
  // (empty: the configured store), falling back to the private temporary store when that
  // cannot be written. `sections`: what only the front end knows (smoke's "startup"), added
  // as they are. Never throws.
  watch::WrittenReport write_report(const watch::ProcessEnd* end, std::int64_t at_ms,
                                    const std::string& report_dir,
                                    const std::vector<std::string>& watchdog_received,
                                    nlohmann::json sections = nlohmann::json::object());
  // Gives the memory cgroup back; after the report (which reads its OOM evidence).
  void release_memory_limit();
  // Removes the faulthandler shim's directory now (the destructor does it otherwise): after a
  // death, once the report is written, for the report comes first.
  void remove_shim() noexcept;

 private:
  [[nodiscard]] std::vector<std::string> environment() const;
  void on_stderr();
  void on_fault_output();
  // The crash handler's message (kernel-watchdog-crash.so): the faulting thread waits in its
  // handler while its stack is read, then is told to go on dying.
  void on_crash_message();
  // Reads what the pipe `fd` holds now into `channel` (the cells it announces go to the watch);
  // false once every writer has closed it.
  bool read_into(int fd, FaultChannel& channel);
  // Reads the cells the shim announced since the last read (never waited for: see cell_read_).
  void read_cell_announcements();
  void look_for_kernel_stderr_pipe();
  void handle_death(const watch::ProcessEnd& end, std::int64_t died_at_ms);
  // Whether the death waits for the system's own crash report (macOS: a fatal signal, and no
  // crash handler reported), which then becomes its crash_stack.
  [[nodiscard]] bool wants_system_crash_report(const watch::ProcessEnd& end) const;
  // Looks for it now and then every kSystemCrashReportLookInterval, within
  // kSystemCrashReportBudget, and tells the death (on_death_) when done.
  void wait_for_system_crash_report(const watch::ProcessEnd& end, std::int64_t died_at_ms);
  // After each sample, under a memory limit of ours: ends a kernel that thrashes at it.
  void guard_against_thrashing(const timeline::MemorySample& sample);
  // Hands the notice the previous kernel of this connection file left to the shim.
  // The notice the previous kernel left, now in the shim's files (nullopt: none).
  std::optional<nlohmann::json> pass_on_death_notice();

  loop::EventLoop& loop_;
  KernelLaunch launch_;
  DeathHandler on_death_;
  std::unique_ptr<StderrTee> stderr_;
  std::unique_ptr<platform::KernelMemoryLimit> memory_limit_;  // before child_: outlives it
  std::function<void()> sample_observer_;
  std::optional<watch::ThrashGuard> thrash_guard_;  // under memory_limit_, unless turned off
  // The spell the guard ended the kernel for: the report's memory_thrash section.
  std::optional<nlohmann::json> thrashing_;
  std::optional<ChildProcess> child_;
  std::vector<std::string> notes_;
  // sitecustomize shim that gets Python tracebacks out of a dying kernel; none with
  // --no-faulthandler or when it could not be written.
  std::optional<faulthandler::PythonShim> python_shim_;
  // A duplicate of the read end of ipykernel's own stderr pipe, drained after the death.
  std::unique_ptr<watch::LastWords> last_words_;
  // faulthandler's own pipe (see data/python/sitecustomize.py): what it writes comes whole,
  // not interleaved with the library's last words on stderr, and is added to the stderr
  // tail, in one piece, at the death.
  util::UniqueFd fault_read_;
  static constexpr std::size_t kFaultTextLimit = 256 * 1024;
  FaultChannel fault_channel_{kFaultTextLimit};
  // The shim's cell announcements, on a pipe of their own that the loop does not watch: read
  // before each memory sample, before a report, and at the death, so that a cell costs the
  // watchdog no wake-up of its own (IOPub's busy wakes it anyway). Each record carries the
  // cell's start time; the shim drops a record rather than wait when the pipe is full.
  util::UniqueFd cell_read_;
  FaultChannel cell_channel_{0};
  bool cells_announced_ = false;  // the kernel was given the pipe (cell_read_ closes at EOF)
  // Our end of the crash handler's socket pair, and what it brought: the faulting thread's
  // native stack (nullopt: no fatal signal reported). Why the kernel got no handler, if not.
  util::UniqueFd crash_socket_;
  std::optional<stacks::CrashStack> crash_stack_;
  std::string crash_handler_missing_;
  std::optional<loop::EventLoop::TimerId> last_words_timer_;
  std::optional<stacks::SystemCrashReportSearch> system_report_search_;
  std::optional<loop::EventLoop::TimerId> system_report_timer_;
  int last_words_looks_ = 0;
  bool dead_ = false;
  static constexpr std::int64_t kMinStderrSampleGapNs = 20'000'000;
  // Under the handler's own cap (2 s): the kernel dies on time even if the unwinder stalls.
  static constexpr std::chrono::milliseconds kCrashCaptureBudget{1500};
  // ReportCrash writes its report a second or so after the death; the report waits that long.
  static constexpr std::chrono::milliseconds kSystemCrashReportBudget{3000};
  static constexpr std::chrono::milliseconds kSystemCrashReportLookInterval{50};
  static constexpr std::chrono::milliseconds kLastWordsLookInterval{100};
  static constexpr int kLastWordsMaxLooks = 600;           // a minute
  static constexpr std::size_t kLastWordsLimit = 1 << 20;  // ipykernel's pipe holds 64 KiB
  std::unique_ptr<watch::Watch> watch_;  // last: unregisters from loop_ when destroyed
};

}  // namespace kwd::launch
