#include "kwd/daemon/daemon.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <zmq.hpp>

#include "kwd/daemon/service_notify.hpp"
#include "kwd/kernelspec/kernelspec.hpp"
#include "kwd/metrics/exposition.hpp"
#include "kwd/platform/namespaces.hpp"
#include "kwd/report/fallback_reports.hpp"
#include "kwd/report/report_store.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/watch/flight_end.hpp"

// The daemon's life: its defaults, its start and its loop. What it does on the loop lives
// beside this file: daemon_discovery.cpp finds kernels, daemon_watching.cpp watches them and
// reports their deaths, daemon_status.cpp answers `status` and publishes the metrics.

namespace kwd::daemon {
namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

// Each watched kernel holds a few descriptors (its TCP connections, ZeroMQ's mailboxes, a
// pidfd): the usual soft limit of 1024 would end discovery at a couple of hundred kernels.
void raise_descriptor_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  const rlim_t wanted = std::min<rlim_t>(limit.rlim_max, 1 << 16);
  if (wanted <= limit.rlim_cur) return;
  limit.rlim_cur = wanted;
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0)
    spdlog::debug("cannot raise the descriptor limit: {}", std::strerror(errno));
}

}  // namespace

std::vector<std::filesystem::path> default_runtime_dirs() {
  std::vector<std::filesystem::path> dirs;
  if (auto dir = env("JUPYTER_RUNTIME_DIR"); !dir.empty())
    dirs.emplace_back(dir);
  else
    dirs.push_back(kernelspec::user_data_dir() / "runtime");
  if (auto xdg = env("XDG_RUNTIME_DIR"); !xdg.empty())
    dirs.push_back(std::filesystem::path(xdg) / "jupyter" / "runtime");
  return dirs;
}

std::filesystem::path default_status_socket(const std::string& report_dir) {
  if (auto xdg = env("XDG_RUNTIME_DIR"); !xdg.empty() && xdg.front() == '/')
    return std::filesystem::path(xdg) / "kernel-watchdog" / "daemon.sock";
  return report::ReportStore::resolve_dir(report_dir).parent_path() / "daemon.sock";
}

Daemon::Daemon(DaemonOptions options) : options_(std::move(options)) {
  if (options_.runtime_dirs.empty()) options_.runtime_dirs = default_runtime_dirs();
  if (options_.status_socket.empty())
    options_.status_socket = default_status_socket(options_.report_dir);
  sessions_ = std::make_unique<JupyterSessions>(options_.runtime_dirs);
  // One context, one I/O thread, for every kernel's sockets: a SUB, a REQ and a monitor
  // pair each, so the default cap of 1023 sockets would stop at about 250 kernels.
  zmq_context_ = std::make_shared<zmq::context_t>(1);
  zmq_context_->set(zmq::ctxopt::max_sockets, 65536);
}

Daemon::~Daemon() {
  kernels_.clear();  // the watches unregister from the loop first
  if (status_listener_) ::unlink(options_.status_socket.c_str());
}

int Daemon::run() {
  raise_descriptor_limit();
  ::signal(SIGPIPE, SIG_IGN);
  started_ms_ = util::wall_ms();
  signals_ =
      std::make_unique<loop::SignalPipe>(std::initializer_list<int>{SIGTERM, SIGINT, SIGHUP});
  if (!open_status_socket()) return 1;
  if (!options_.metrics_address.empty()) {
    try {
      metrics_server_ = std::make_unique<metrics::HttpServer>(options_.metrics_address);
    } catch (const std::exception& e) {
      spdlog::error("{}", e.what());
      return 1;
    }
    // The bound port, which is the one to scrape when 0 (any free port) was asked for.
    auto host = metrics::split_address(options_.metrics_address).first;
    if (host.find(':') != std::string::npos) host = "[" + host + "]";
    metrics_url_ = fmt::format("http://{}:{}/metrics", host, metrics_server_->port());
    spdlog::info("metrics at {}", metrics_url_);
  }
  dirs_ = make_runtime_dir_watcher(options_.runtime_dirs);
  std::string dirs;
  for (const auto& d : options_.runtime_dirs)
    dirs += (dirs.empty() ? "" : ", ") + d.string();
  spdlog::info("daemon started: watching connection files in {}; status socket {}", dirs,
               options_.status_socket.string());

  bool stop = false;
  loop_.watch_fd(signals_->fd(), [this, &stop] {
    for (int s : signals_->drain()) {
      if (s == SIGHUP) {
        spdlog::info("SIGHUP: rescanning");
        scan();
        continue;
      }
      stop = true;
      loop_.stop();
    }
  });
  if (dirs_->fd() >= 0) loop_.watch_fd(dirs_->fd(), [this] { note_runtime_dir_changes(); });
  scanner_.set_all_users(options_.all_users);
  if (options_.all_users) {
    // Kernels' cgroup paths as the host writes them (see enter_cgroup_namespace_of).
    try {
      if (const auto done = platform::enter_cgroup_namespace_of(1); !done.empty())
        spdlog::info("{} (the host's): pods' cgroups read as the node names them", done);
    } catch (const std::exception& e) {
      spdlog::warn("{}; pods' cgroups are read from this one", e.what());
    }
  }
  process_events_ = make_process_events();
  if (process_events_->fd() >= 0) {
    loop_.watch_fd(process_events_->fd(), [this] { on_process_events(); });
    scanner_.set_execs_announced(true);
  } else {
    process_events_.reset();  // none here: the scans alone find kernels
  }
  if (status_listener_) loop_.watch_fd(status_listener_.get(), [this] { on_status_client(); });
  loop_.every(options_.scan_interval, [this] {
    dirs_->rewatch();
    // With process events every exec was examined as it happened, and a lost event brings a
    // full listing by itself: the table is listed every kFullScanEvery-th time only (on a node
    // of a few hundred processes the listing was most of the daemon's idle CPU). In between,
    // the kernels already known are looked at again (a connection file written late).
    if (process_events_ && process_events_->fd() >= 0 && ++light_scans_ < kFullScanEvery) {
      consider(scanner_.known());
      name_unnamed_kernels();
      return;
    }
    light_scans_ = 0;
    scan();
  });
  watched_record_.emplace(report::ReportStore::resolve_dir(options_.report_dir));
  report_unwatched_ends();
  // The record's time says until when this daemon was alive, should it be killed.
  loop_.every(kRecordTouchInterval, [this] { watched_record_->touch(); });
  scan();
  // Reports a store refused, here or in an earlier daemon's time, move in once it takes them:
  // its own store's, and its pods' (under it), whichever daemon wrote them.
  stores_refusing_.insert(options_.report_dir);
  const std::string base = report::store_key(report::ReportStore::resolve_dir(options_.report_dir));
  for (const auto& waited_for : report::stores_waited_for())
    if (waited_for.starts_with(base + "/")) stores_refusing_.insert(waited_for);
  adopt_waiting_reports();
  // Kernels whose `run` watchdog died with them (a whole cgroup killed) left a flight record
  // in this store: reported from it.
  flights_ = std::make_unique<watch::FlightScanner>(
      report::ReportStore(report::ReportStore::resolve_dir(options_.report_dir),
                          report::StoreLimits::from_environment()));
  flights_->scan();
  loop_.every(kAdoptInterval, [this] {
    if (!stores_refusing_.empty()) adopt_waiting_reports();
    flights_->scan();
  });
  if (metrics_server_ || !options_.metrics_textfile.empty()) {
    publish_metrics();
    loop_.every(options_.metrics_interval, [this] { publish_metrics(); });
  }
  notify_service("READY=1");
  if (const auto ping = service_watchdog_interval())
    loop_.every(*ping, [] { notify_service("WATCHDOG=1"); });
  if (!loop_.run() && !stop) {
    spdlog::error("event loop failed: {}", std::strerror(errno));
    return 1;
  }
  notify_service("STOPPING=1");
  // A death whose report waited for a manager's clean-up is reported now: the daemon can wait
  // no longer, and what it knows is a death.
  std::vector<pid_t> pending;
  for (const auto& [pid, kernel] : kernels_)
    if (kernel.pending_death) pending.push_back(pid);
  for (const pid_t pid : pending)
    store_pending_death(pid);
  // Stopped on purpose: the kernels that end from now on are not watched by intent, and the
  // next daemon has nothing to account for.
  if (watched_record_) watched_record_->remove();
  // A daemon that is gone watches nothing: no stale file for the collector to keep showing.
  if (!options_.metrics_textfile.empty()) {
    std::error_code ignored;
    std::filesystem::remove(options_.metrics_textfile, ignored);
  }
  metrics_server_.reset();
  spdlog::info("daemon stopping ({} kernels were watched)", kernels_.size());
  return 0;
}

}  // namespace kwd::daemon
