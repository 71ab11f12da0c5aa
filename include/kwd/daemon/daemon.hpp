#pragma once

#include <sys/types.h>
#include <sys/un.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kwd/daemon/container_identity.hpp"
#include "kwd/daemon/jupyter_sessions.hpp"
#include "kwd/daemon/kernel_processes.hpp"
#include "kwd/daemon/off_loop_read.hpp"
#include "kwd/daemon/process_events.hpp"
#include "kwd/daemon/runtime_dir_watcher.hpp"
#include "kwd/daemon/watched_record.hpp"
#include "kwd/kernelspec/kernelspec.hpp"
#include "kwd/loop/event_loop.hpp"
#include "kwd/loop/signal_pipe.hpp"
#include "kwd/metrics/exposition.hpp"
#include "kwd/metrics/http_server.hpp"
#include "kwd/platform/root_view.hpp"
#include "kwd/probes/host_sources.hpp"
#include "kwd/protocol/listener_options.hpp"
#include "kwd/util/unique_fd.hpp"
#include "kwd/watch/flight_end.hpp"
#include "kwd/watch/watch.hpp"

namespace kwd::daemon {

// A background service pings each kernel every 2 s and calls one that stays silent for three
// pings (6 s) hung, where `run` pings every second and waits five: half the wake-ups for a
// daemon with dozens of idle kernels. (jupyter_client's restarter polls every 3 s.)
inline protocol::ListenerOptions background_listener_options() {
  protocol::ListenerOptions options;
  options.heartbeat.interval = std::chrono::milliseconds(2000);
  options.heartbeat.misses_to_hang = 3;
  return options;
}

struct DaemonOptions {
  // Where kernels' connection files appear (watched for changes; kernels whose files lie
  // elsewhere are found by the process scan). Empty: default_runtime_dirs().
  std::vector<std::filesystem::path> runtime_dirs;
  std::string report_dir;               // empty: the store `run` uses
  std::filesystem::path status_socket;  // empty: default_status_socket()
  std::chrono::milliseconds scan_interval{1000};
  std::chrono::milliseconds sample_interval{1000};
  protocol::ListenerOptions listener = background_listener_options();
  std::string nvml_library;
  // Prometheus metrics, off unless asked: served at http://ADDRESS/metrics, and/or written
  // to a file for node_exporter's textfile collector, every metrics_interval and at once
  // after a death.
  std::string metrics_address;
  std::filesystem::path metrics_textfile;
  std::chrono::milliseconds metrics_interval{5000};
  // The node's daemon (root, hostPID): kernels of every user and container, their connection
  // files read through their own root (/proc/PID/root), each kernel in a container keyed by
  // and reported under its pod (report_dir/NAMESPACE/POD/, 0700), each report also one JSON
  // line on stdout, metrics labelled with namespace, pod and container.
  bool all_users = false;
  NodeOptions node;
};

// Jupyter's runtime dir ($JUPYTER_RUNTIME_DIR, else runtime/ in the Jupyter data dir) and
// VS Code's raw kernels' ($XDG_RUNTIME_DIR/jupyter/runtime).
std::vector<std::filesystem::path> default_runtime_dirs();
// $XDG_RUNTIME_DIR/kernel-watchdog/daemon.sock, else next to the report store.
std::filesystem::path default_status_socket(const std::string& report_dir);
// The address of the status socket at `path`; throws std::runtime_error when the path is too
// long for one. Used by the daemon to listen and by `status` to connect.
sockaddr_un status_socket_address(const std::filesystem::path& path);

// `kernel-watchdog daemon`: one process, one event loop, every kernel of this user watched
// (those under `kernel-watchdog run` are left to their launcher: one report per death).
// Kernels are found by their connection files appearing (inotify) and by a periodic scan
// of the process table; each gets a Watch with a pidfd death source. A death nobody asked
// for gets a report; `kernel-watchdog status` reads the daemon's socket.
class Daemon {
 public:
  explicit Daemon(DaemonOptions options);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Runs until SIGTERM or SIGINT (SIGHUP rescans). Returns the exit status.
  int run();

 private:
  struct Kernel {
    KernelProcess process;
    std::string kernel_id;
    std::string notebook;     // "" when not known
    std::string kernel_name;  // its kernelspec's, "" when not known
    std::int64_t watched_since_ms = 0;
    std::string previous_death;  // the report of this connection file's previous process
    std::optional<ContainerIdentity> container;  // in a pod's container (all_users)
    std::optional<std::int64_t> container_oom_kills_at_start;
    std::unique_ptr<watch::Watch> watch;
    // Whether its connection file is there, asked off the loop (at its death, and while its
    // manager's clean-up is waited for).
    std::shared_ptr<FileLook> connection_file_look;
    // A death by a signal its manager may have sent: its report, built at the death, is kept
    // until `until_ns` (steady clock) unless the connection file goes first.
    struct PendingDeath {
      watch::ProcessEnd end;
      std::int64_t at_ms = 0;
      std::int64_t until_ns = 0;
      nlohmann::json report;
    };
    std::optional<PendingDeath> pending_death;
  };

  // Discovery (daemon_discovery.cpp): which processes are kernels for us to watch.
  void scan(KernelProcessScanner::ScanKind kind = KernelProcessScanner::ScanKind::regular);
  // Kernels a scan or the process events found: watched unless under a launcher, watched
  // already, or turned away before.
  void consider(const KernelProcessScanner::Found& found);
  // Asks the Jupyter servers for the notebook of kernels found in the last 30 s without one.
  void name_unnamed_kernels();
  void on_process_events();
  // Quick scans for 2 s from now: a connection file appeared, its process is on its way.
  void scan_soon();
  // What the runtime directories' watch announced: quick scans for a file written, the time of
  // each removal kept (removed_at_ns_).
  void note_runtime_dir_changes();
  // Whether the runtime directories' watch saw `connection_file` removed within the manager's
  // clean-up window (kManagerCleanupWindowNs) before now.
  bool removed_a_moment_ago(const std::string& connection_file);
  void name_notebook(Kernel& k, bool now);
  // The kernelspecs installed, read again when the last reading is over kKernelspecsFreshMs
  // old: kernels found together (a server restoring its sessions) share one reading.
  const std::vector<kernelspec::Kernelspec>& kernelspecs();

  // Watching (daemon_watching.cpp): one kernel's Watch, and its death or hang reported.
  void start_watching(const KernelProcess& process);
  // The kernel's connection file, read off the loop (OffLoopRead); nullopt while the read has
  // not answered (a stalled mount): a later scan asks again.
  std::optional<platform::RootView::FileRead> connection_file_of(const KernelProcess& process);
  void on_death(pid_t pid, const watch::ProcessEnd& end, std::int64_t at_ms);
  // A pending death's report stored once its time is up, or dropped if the manager deleted
  // the connection file before.
  void wait_for_managers_cleanup(pid_t pid);
  // A pending death's report stored now (its time is up, or the daemon stops).
  void store_pending_death(pid_t pid);
  // What a death's report is told besides the watch's facts.
  watch::ReportContext death_context(const Kernel& k, const watch::ProcessEnd& end,
                                     std::int64_t at_ms) const;
  // The death's report stored (built now when `report` is null), counted and the kernel let go.
  void store_death(pid_t pid, const watch::ProcessEnd& end, std::int64_t at_ms,
                   std::optional<nlohmann::json> report);
  // The kernel's watch dropped, on the loop's next pass.
  void let_go(pid_t pid);
  // What ended kernels freed goes back to the system a second after a kernel's end: once for
  // the kernels of a burst, at most once a second while they keep ending.
  void give_freed_memory_back_soon();
  void on_hang(pid_t pid, const protocol::HangEvidence& hang);
  // Counts a report written (or not) in `report_dir`; one the store refused waits in the
  // fallback location, and that store is tried again every kAdoptInterval.
  void count_written(const std::string& report_dir, bool written, bool in_fallback);
  void adopt_waiting_reports();
  // The record of what is watched (watched_record.hpp): rewritten on the loop's next pass
  // after a change, and read once at the start for the kernels that ended while no daemon
  // ran, each given a record in its store ("ended while unwatched").
  void record_watched();
  void write_watched_record();
  void report_unwatched_ends();
  // The ZeroMQ context for a kernel's sockets: the daemon's, or for a kernel in another
  // network namespace (a pod's) one whose I/O thread lives there, shared by that pod's kernels.
  std::shared_ptr<zmq::context_t> context_for(pid_t pid);
  // Where a kernel's reports go: the store, or its pod's directory in it (all_users).
  [[nodiscard]] std::string report_dir_for(const Kernel& k) const;
  // The report's "kubernetes" section: the container, its limits and OOM kills now.
  static nlohmann::json kubernetes_section(const Kernel& k);
  // What a kernel's connection file is remembered by: its container's and its own path.
  [[nodiscard]] static std::string file_key(const Kernel& k);

  // Telling (daemon_status.cpp): the status socket and the metrics.
  bool open_status_socket();
  void on_status_client();
  [[nodiscard]] nlohmann::json status_json() const;
  [[nodiscard]] metrics::DaemonFigures metrics_figures() const;
  void publish_metrics();

  DaemonOptions options_;
  loop::EventLoop loop_;
  std::unique_ptr<loop::SignalPipe> signals_;
  std::unique_ptr<RuntimeDirWatcher> dirs_;
  std::unique_ptr<ProcessEvents> process_events_;
  util::UniqueFd status_listener_;
  std::map<pid_t, Kernel> kernels_;
  std::vector<KernelProcess> under_launcher_;  // seen in the last scan
  KernelProcessScanner scanner_;
  // Processes not to look at again: (pid, start time) whose watch could not be set up.
  std::set<std::pair<pid_t, std::uint64_t>> skipped_;
  // Kernels whose death was handled: a scan may still list one until its manager reaps it.
  std::set<std::pair<pid_t, std::uint64_t>> ended_;
  // Connection file -> the report of the last death there: a kernel restarted on the same file
  // names it in its own report. A node's daemon sees kernels by the thousand, so a death is
  // forgotten after kDeathRememberedMs, and oldest first beyond kDeathsRemembered (unbounded,
  // it was part of the soak's memory growth). Not when the file goes: jupyter_client's
  // restarter deletes and writes it again for a kernel that died at its start.
  struct LastDeath {
    std::string report_id;
    std::int64_t at_ms = 0;  // steady
  };
  std::map<std::string, LastDeath> last_death_by_file_;
  static constexpr std::size_t kDeathsRemembered = 256;
  static constexpr std::int64_t kDeathRememberedMs = 3'600'000;
  void remember_death(const std::string& file_key, std::string report_id);
  // While a batch of execs is considered: when each exec'd (steady ns), for the log's "found
  // N ms after its exec", which says how late the daemon was.
  std::map<pid_t, std::int64_t> exec_at_ns_;
  std::optional<loop::EventLoop::TimerId> quick_scan_;
  std::optional<loop::EventLoop::TimerId> memory_give_back_;  // (give_freed_memory_back_soon)
  int quick_scans_left_ = 0;
  // Regular scans since the table was last listed whole (see run()).
  int light_scans_ = 0;
  static constexpr int kFullScanEvery = 5;
  std::int64_t started_ms_ = 0;
  std::uint64_t reports_written_ = 0;
  // (cause, namespace): deaths nobody asked for; namespace "" outside a pod.
  std::map<std::pair<std::string, std::string>, std::int64_t> deaths_by_cause_;
  // The same keys: the newest death of each, with its report.
  std::map<std::pair<std::string, std::string>, metrics::DeathFigures> last_death_by_cause_;
  // Reports the report store could not take (see WrittenReport::in_fallback).
  std::uint64_t report_write_failures_ = 0;
  // Stores (as report_dir_for says them) whose reports wait in the fallback location.
  std::set<std::string> stores_refusing_;
  std::optional<WatchedRecordFile> watched_record_;
  // Flight records of `run` watchdogs that died with their kernels, in the daemon's store.
  std::unique_ptr<watch::FlightScanner> flights_;
  static constexpr std::chrono::seconds kRecordTouchInterval{60};
  bool watched_record_due_ = false;
  static constexpr std::chrono::seconds kAdoptInterval{10};
  std::unique_ptr<JupyterSessions> sessions_;
  static constexpr std::int64_t kKernelspecsFreshMs = 2'000;
  std::vector<kernelspec::Kernelspec> kernelspecs_;
  std::int64_t kernelspecs_read_ms_ = -1;
  // Where the next kernel's first sample falls, and when the last one was found (see
  // start_watching).
  int first_sample_step_ = 0;
  std::int64_t last_watch_started_ms_ = INT64_MIN / 2;
  std::shared_ptr<zmq::context_t> zmq_context_;
  std::map<std::uint64_t, std::weak_ptr<zmq::context_t>> namespace_contexts_;  // by netns inode
  // Kernels in containers found before their connection file exists (no directory watch
  // sees a container's /tmp): when each was first found so, looked for by quick scans for
  // kFileWaitQuickMs after that.
  std::map<std::pair<pid_t, std::uint64_t>, std::int64_t> waiting_for_file_;
  static constexpr std::int64_t kFileWaitQuickMs = 10'000;
  // Connection files the runtime directories' watch saw removed: when (steady ns), kept for
  // kRemovalsKeptNs.
  std::map<std::string, std::int64_t> removed_at_ns_;
  static constexpr std::int64_t kRemovalsKeptNs = 10'000'000'000;
  // Connection files being read off the loop that have not answered yet.
  struct PendingRead {
    OffLoopRead read;
    bool said = false;  // its stall is in the log
  };
  std::map<std::pair<pid_t, std::uint64_t>, PendingRead> connection_reads_;
  // When a connection file's read last ran out of its wait (steady ms): for a second after,
  // new reads are not waited for (a stalled home holding every kernel's file would otherwise
  // cost each new kernel of a scan its wait), and are taken at the next scan.
  std::int64_t connection_read_stalled_ms_ = INT64_MIN / 2;
  // One kernel log reader, one NVML thread, one meminfo reader for all the kernels.
  std::shared_ptr<probes::HostSources> host_sources_ = std::make_shared<probes::HostSources>();
  std::unique_ptr<metrics::HttpServer> metrics_server_;
  std::string metrics_url_;        // "" when not served
  bool textfile_failing_ = false;  // said once, then again when it works
};

}  // namespace kwd::daemon
