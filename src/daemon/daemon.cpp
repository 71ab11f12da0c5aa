#include "kwd/daemon/daemon.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <zmq.hpp>

#include "kwd/daemon/kernel_name.hpp"
#include "kwd/daemon/service_notify.hpp"
#include "kwd/diagnosis/report_view.hpp"
#include "kwd/kernelspec/kernelspec.hpp"
#include "kwd/logging/log_fields.hpp"
#include "kwd/metrics/exposition.hpp"
#include "kwd/metrics/textfile.hpp"
#include "kwd/platform/host.hpp"
#include "kwd/probes/process_identity.hpp"
#include "kwd/protocol/connection_file.hpp"
#include "kwd/protocol/kernel_argv.hpp"
#include "kwd/report/report_store.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/private_files.hpp"
#include "kwd/watch/death_policy.hpp"
#include "kwd/watch/report_writer.hpp"

namespace kwd::daemon {
namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

// After a connection file appears its kernel is looked for this often, this many times: the
// manager writes the file first and starts the process after.
constexpr std::chrono::milliseconds kQuickScanInterval{25};
constexpr int kQuickScans = 80;  // 2 s

std::string state_of(const watch::Watch& w) {
  const auto* listener = w.listener();
  if (listener == nullptr) return "unknown";
  if (listener->current_hang()) return "hung";
  const auto& state = listener->activity().execution_state();
  return state ? *state : "starting";
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

sockaddr_un status_socket_address(const std::filesystem::path& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string p = path.string();
  if (p.size() >= sizeof addr.sun_path)
    throw std::runtime_error("socket path too long (" + std::to_string(p.size()) + " bytes): " + p);
  std::memcpy(addr.sun_path, p.c_str(), p.size() + 1);
  return addr;
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

bool Daemon::open_status_socket() {
  try {
    util::SafeDir::open_private(options_.status_socket.parent_path());
    const sockaddr_un addr = status_socket_address(options_.status_socket);
    util::UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (probe &&
        ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) {
      spdlog::error("a kernel-watchdog daemon is already running (its socket {} answers)",
                    options_.status_socket.string());
      return false;
    }
    ::unlink(addr.sun_path);  // a socket left by a daemon that was killed
    util::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    const mode_t old = ::umask(0177);  // the socket is created 0600
    const int bound = ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
    ::umask(old);
    if (bound != 0 || ::listen(fd.get(), 16) != 0)
      throw std::runtime_error(std::string("cannot listen on it: ") + std::strerror(errno));
    status_listener_ = std::move(fd);
  } catch (const std::exception& e) {
    // Watching matters more than answering `status`.
    spdlog::warn("no status socket at {}: {}; `kernel-watchdog status` will not reach us",
                 options_.status_socket.string(), e.what());
  }
  return true;
}

namespace {

constexpr std::chrono::milliseconds kDaemonIdleSampleInterval{5000};

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
  if (dirs_->fd() >= 0)
    loop_.watch_fd(dirs_->fd(), [this] {
      if (dirs_->drain()) scan_soon();
    });
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
    scan();
  });
  scan();
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
  // A daemon that is gone watches nothing: no stale file for the collector to keep showing.
  if (!options_.metrics_textfile.empty()) {
    std::error_code ignored;
    std::filesystem::remove(options_.metrics_textfile, ignored);
  }
  metrics_server_.reset();
  spdlog::info("daemon stopping ({} kernels were watched)", kernels_.size());
  return 0;
}

void Daemon::scan_soon() {
  quick_scans_left_ = kQuickScans;
  if (quick_scan_) return;
  // Not ended by the first kernel found: a burst of files (a server restoring fifty sessions)
  // waits for fifty processes. A quick scan examines only processes new in the table.
  quick_scan_ = loop_.every(kQuickScanInterval, [this] {
    // With process events, every exec was examined as it happened: what is left to do is to
    // watch the kernels whose connection file was not there yet, without listing the table
    // forty times a second while a server restores its sessions.
    if (process_events_ && process_events_->fd() >= 0)
      consider(scanner_.known());
    else
      scan(KernelProcessScanner::ScanKind::quick);
    if (--quick_scans_left_ <= 0) {
      loop_.cancel(*quick_scan_);
      quick_scan_.reset();
    }
  });
}

void Daemon::scan(KernelProcessScanner::ScanKind kind) {
  under_launcher_.clear();
  const auto found = scanner_.scan(kind);
  // Who is no longer in the table is forgotten: the same pid later is another process.
  if (!ended_.empty() || !skipped_.empty()) {
    std::set<std::pair<pid_t, std::uint64_t>> present;
    for (const KernelProcess* process : found)
      present.insert({process->pid, process->start_time});
    std::erase_if(ended_, [&](const auto& key) { return !present.contains(key); });
    std::erase_if(skipped_, [&](const auto& key) { return !present.contains(key); });
  }
  consider(found);
  // A server records its session a moment after it starts the kernel; a kernel no server
  // has named within 30 s (VS Code's, papermill's, a console's) is not asked about again
  // until its death.
  if (kind == KernelProcessScanner::ScanKind::quick) return;
  const std::int64_t now = util::wall_ms();
  for (auto& [pid, k] : kernels_)
    if (k.notebook.empty() && now - k.watched_since_ms < 30'000) name_notebook(k, false);
}

void Daemon::on_process_events() {
  auto batch = process_events_->drain();
  if (batch.refused) {                        // scans only, from now on
    loop_.unwatch_fd(process_events_->fd());  // before the source closes it
    process_events_.reset();
    scanner_.set_execs_announced(false);
    scan();  // what exec'd before the refusal came was not examined at its exec
    return;
  }
  if (batch.lost) {
    // Which execs were missed is not known: the whole table, new processes looked at as if
    // no exec had been announced.
    scanner_.set_execs_announced(false);
    scan();
    scanner_.set_execs_announced(true);
  }
  if (batch.exec.empty()) return;
  const auto found = scanner_.examine_now(batch.exec);
  for (std::size_t i = 0; i < batch.exec.size() && i < batch.exec_at_ns.size(); ++i)
    exec_at_ns_[batch.exec[i]] = batch.exec_at_ns[i];
  consider(found);
  exec_at_ns_.clear();
  // A kernel started without a connection file writes its own once its ports are bound:
  // looked for by the quick scans, not left to the next full one.
  for (const KernelProcess* process : found) {
    if (!process->under_launcher && !kernels_.contains(process->pid)) {
      scan_soon();
      break;
    }
  }
}

void Daemon::consider(const KernelProcessScanner::Found& found) {
  for (const KernelProcess* found_process : found) {
    const KernelProcess& process = *found_process;
    if (process.under_launcher) {
      if (std::none_of(under_launcher_.begin(), under_launcher_.end(),
                       [&](const auto& known) { return known.pid == process.pid; }))
        under_launcher_.push_back(process);
      continue;
    }
    if (auto it = kernels_.find(process.pid); it != kernels_.end()) {
      // The same process with another argv has exec'd since: what was watched was a wrapper
      // on its way to the kernel (`env -u VAR python -m ipykernel_launcher -f FILE`, `nice`,
      // `numactl`), whose argv, kernel name and environment (the notebook) are not the
      // kernel's. Watched afresh.
      if (it->second.process.start_time == process.start_time &&
          it->second.process.argv == process.argv)
        continue;
      kernels_.erase(it);  // a reused pid, or an exec: the one we watched is gone
    }
    if (skipped_.contains({process.pid, process.start_time}) ||
        ended_.contains({process.pid, process.start_time}))
      continue;
    start_watching(process);
  }
}

void Daemon::name_notebook(Kernel& k, bool now) {
  auto path = sessions_->notebook_of(k.kernel_id, now);
  if (path.empty()) return;
  k.notebook = path;
  k.watch->set_notebook({std::move(path), "jupyter_server"});
}

const std::vector<kernelspec::Kernelspec>& Daemon::kernelspecs() {
  const std::int64_t now = util::steady_ms();
  if (kernelspecs_read_ms_ < 0 || now - kernelspecs_read_ms_ > kKernelspecsFreshMs) {
    kernelspecs_ = kernelspec::find_all();
    kernelspecs_read_ms_ = now;
  }
  return kernelspecs_;
}

void Daemon::start_watching(const KernelProcess& process) {
  const auto skip = [&](const std::string& why) {
    spdlog::warn("not watching pid {} ({}): {}", process.pid, process.connection_file, why);
    skipped_.insert({process.pid, process.start_time});
  };
  struct stat st {};
  if (::stat(process.connection_file.c_str(), &st) != 0) {
    // Not written yet, or removed: looked at again by the next scan.
    return;
  }
  if (st.st_uid != ::getuid()) return skip("its connection file belongs to another user");
  if (!S_ISREG(st.st_mode)) return skip("its connection file is not a regular file");
  try {
    (void)protocol::load_connection_file(process.connection_file);
  } catch (const std::exception& e) {
    return skip(e.what());
  }
  auto notebook = probes::notebook_of_kernel(process.connection_file, process.pid);
  if (notebook.path.empty())
    if (auto path = sessions_->notebook_of(
            protocol::kernel_id_from_connection_file(process.connection_file));
        !path.empty())
      notebook = {std::move(path), "jupyter_server"};
  std::unique_ptr<watch::DeathSource> death;
  try {
    death = watch::make_process_death_source(process.pid);
  } catch (const std::exception& e) {
    return skip(std::string("cannot watch the process: ") + e.what());
  }
  Kernel kernel;
  kernel.process = process;
  kernel.kernel_id = protocol::kernel_id_from_connection_file(process.connection_file);
  kernel.notebook = notebook.path;
  kernel.kernel_name = kernelspec_name_for(process.argv, kernelspecs());
  kernel.watched_since_ms = util::wall_ms();
  if (auto previous = last_death_by_file_.find(process.connection_file);
      previous != last_death_by_file_.end())
    kernel.previous_death = previous->second;
  watch::WatchOptions wo;
  wo.kernel_pid = process.pid;
  wo.connection_file = process.connection_file;
  wo.mode = "daemon";
  wo.kernel_argv = process.argv;
  wo.notebook = notebook;
  wo.sample_interval = options_.sample_interval;
  // A background service: an idle kernel whose memory is flat is looked at every 5 s; a busy
  // or growing one at the full rate.
  wo.idle_sample_interval = std::max(options_.sample_interval, kDaemonIdleSampleInterval);
  // A kernel found alone is sampled at once. Kernels found in a burst (each within a sample
  // interval of the one before) take their first readings in sixteen steps over one
  // interval, not all in the same tick.
  const std::int64_t now_ms = util::steady_ms();
  first_sample_step_ = now_ms - last_watch_started_ms_ < options_.sample_interval.count()
                           ? (first_sample_step_ + 1) % 16
                           : 0;
  last_watch_started_ms_ = now_ms;
  wo.first_sample_after = options_.sample_interval * first_sample_step_ / 16;
  wo.listener = options_.listener;
  wo.probes.nvml_library = options_.nvml_library;
  wo.probes.host = host_sources_;
  wo.zmq_context = zmq_context_;
  const pid_t pid = process.pid;
  kernel.watch = std::make_unique<watch::Watch>(
      loop_, std::move(wo), std::move(death),
      [this, pid](const watch::ProcessEnd& end, std::int64_t at) { on_death(pid, end, at); },
      [this, pid](const protocol::HangEvidence& hang) { on_hang(pid, hang); });
  auto& placed = kernels_[pid] = std::move(kernel);
  placed.watch->start();
  const logging::LogFields fields({{"kernel_id", placed.kernel_id}});
  std::string found_at;
  if (const auto exec = exec_at_ns_.find(pid); exec != exec_at_ns_.end() && exec->second > 0)
    found_at = fmt::format(", {:.1f} ms after its exec",
                           static_cast<double>(util::steady_ns() - exec->second) / 1e6);
  spdlog::info("watching kernel {} (pid {}{}{}{})", placed.kernel_id, pid, found_at,
               notebook.path.empty() ? "" : ", ", notebook.path);
}

void Daemon::on_death(pid_t pid, const watch::ProcessEnd& end, std::int64_t at_ms) {
  auto it = kernels_.find(pid);
  if (it == kernels_.end()) return;
  Kernel& k = it->second;
  ended_.insert({pid, k.process.start_time});
  const logging::LogFields fields({{"kernel_id", k.kernel_id}});
  // jupyter_client interrupts (SIGINT) every kernel it shuts down, before the request; a
  // kernel still starting has no handler for it yet and dies of it. Once started, ipykernel
  // turns SIGINT into KeyboardInterrupt, so a death by SIGINT is a manager's shutdown.
  const bool interrupted_by_manager =
      end.status && end.status->signaled && end.status->signal == SIGINT;
  if (interrupted_by_manager ||
      watch::death_was_requested(end, k.watch->shutdown_requested(), {}, at_ms)) {
    spdlog::info("kernel {} (pid {}) {} (requested); no report", k.kernel_id, pid,
                 end.status ? end.status->describe() : end.how_known);
  } else {
    if (k.notebook.empty()) name_notebook(k, true);
    watch::ReportContext context;
    context.end = &end;
    context.at_ms = at_ms;
    if (!end.status)
      context.notes.push_back(
          "the exit status of a kernel that is not the watchdog's child could not be known "
          "here (" +
          end.how_known +
          "); under `kernel-watchdog run` (kernelspec wrap) it "
          "always is");
    if (!k.previous_death.empty())
      context.notes.push_back(
          "this kernel's previous process (same connection file) died "
          "too: report " +
          k.previous_death);
    const auto written = watch::write_report(*k.watch, context, k.kernel_id, options_.report_dir);
    if (written.path) {
      last_death_by_file_[k.process.connection_file] = written.path->stem().string();
      ++reports_written_;
    }
    ++deaths_by_cause_
        [diagnosis::ReportView(written.document).text("/diagnosis/cause").value_or("unknown")];
    if (metrics_server_ || !options_.metrics_textfile.empty())
      loop_.after(std::chrono::milliseconds(0), [this] { publish_metrics(); });
  }
  // Not from inside the watch's own handler: it is destroyed on the loop's next pass.
  loop_.after(std::chrono::milliseconds(0), [this, pid] { kernels_.erase(pid); });
}

void Daemon::on_hang(pid_t pid, const protocol::HangEvidence& hang) {
  auto it = kernels_.find(pid);
  if (it == kernels_.end()) return;
  watch::ReportContext context;
  context.at_ms = hang.detected_at_ms;
  const auto written =
      watch::write_report(*it->second.watch, context, it->second.kernel_id, options_.report_dir);
  if (written.path) ++reports_written_;
}

metrics::DaemonFigures Daemon::metrics_figures() const {
  metrics::DaemonFigures f;
  f.version = KWD_VERSION;
  for (const auto& [pid, k] : kernels_) {
    metrics::KernelFigures figures;
    figures.kernel_id = k.kernel_id;
    figures.notebook = k.notebook;
    figures.kernel_name = k.kernel_name;
    figures.pid = pid;
    figures.state = state_of(*k.watch);
    if (const auto* s = k.watch->timeline().latest()) {
      figures.rss_bytes = s->rss;
      figures.gpu_bytes = s->gpu_used;
    }
    f.kernels.push_back(std::move(figures));
  }
  for (const auto& p : under_launcher_)
    if (std::filesystem::path(p.argv.empty() ? "" : p.argv[0]).filename() != "kernel-watchdog")
      ++f.kernels_under_launcher;
  f.deaths_by_cause = deaths_by_cause_;
  f.reports_written = static_cast<std::int64_t>(reports_written_);
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) == 0)
    f.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                    static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  f.resident_bytes = platform::self_resident_bytes();
  f.start_time_seconds = static_cast<double>(started_ms_) / 1000.0;
  return f;
}

void Daemon::publish_metrics() {
  const auto figures = metrics_figures();
  if (!options_.metrics_textfile.empty()) {
    try {
      metrics::write_textfile(options_.metrics_textfile,
                              metrics::render(figures, /*process_metrics=*/false));
      if (textfile_failing_)
        spdlog::info("metrics file {} written again", options_.metrics_textfile.string());
      textfile_failing_ = false;
    } catch (const std::exception& e) {
      if (!textfile_failing_) spdlog::warn("metrics file not written: {}; trying again", e.what());
      textfile_failing_ = true;
    }
  }
  if (metrics_server_) metrics_server_->publish(metrics::render(figures));
}

nlohmann::json Daemon::status_json() const {
  const std::int64_t now = util::wall_ms();
  nlohmann::json kernels = nlohmann::json::array();
  for (const auto& [pid, k] : kernels_) {
    nlohmann::json row = {
        {"kernel_id", k.kernel_id},
        {"notebook", k.notebook.empty() ? nlohmann::json(nullptr) : nlohmann::json(k.notebook)},
        {"pid", pid},
        {"connection_file", k.process.connection_file},
        {"watched_by", "daemon"},
        {"state", state_of(*k.watch)},
        {"uptime_s", (now - k.watch->started_at_ms()) / 1000}};
    if (const auto* s = k.watch->timeline().latest()) {
      if (s->rss >= 0) row["rss_bytes"] = s->rss;
      if (s->gpu_used >= 0) row["gpu_bytes"] = s->gpu_used;
      const auto recent = k.watch->timeline().recent();
      for (const auto& old : recent)
        if (old.t_ms >= s->t_ms - 60'000 && old.rss >= 0 && s->rss >= 0) {
          row["rss_change_60s_bytes"] = s->rss - old.rss;
          break;
        }
    }
    kernels.push_back(std::move(row));
  }
  for (const auto& p : under_launcher_) {
    if (std::filesystem::path(p.argv.empty() ? "" : p.argv[0]).filename() == "kernel-watchdog")
      continue;  // the launcher itself; its kernel is the row
    const auto notebook = probes::notebook_of_kernel(p.connection_file, p.pid).path;
    kernels.push_back(
        {{"kernel_id", protocol::kernel_id_from_connection_file(p.connection_file)},
         {"notebook", notebook.empty() ? nlohmann::json(nullptr) : nlohmann::json(notebook)},
         {"pid", p.pid},
         {"connection_file", p.connection_file},
         {"watched_by", "launcher"}});
  }
  return {{"daemon",
           {{"pid", ::getpid()},
            {"uptime_s", (now - started_ms_) / 1000},
            {"reports_written", reports_written_},
            {"status_socket", options_.status_socket.string()},
            {"metrics_url",
             metrics_url_.empty() ? nlohmann::json(nullptr) : nlohmann::json(metrics_url_)},
            {"metrics_textfile", options_.metrics_textfile.empty()
                                     ? nlohmann::json(nullptr)
                                     : nlohmann::json(options_.metrics_textfile.string())}}},
          {"kernels", std::move(kernels)}};
}

void Daemon::on_status_client() {
  for (;;) {
    util::UniqueFd client(::accept4(status_listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!client) return;
    const std::string text = status_json().dump() + "\n";
    // Best effort and never blocking for long: a client that does not read loses its answer.
    timeval timeout{0, 200'000};
    ::setsockopt(client.get(), SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    std::size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::send(client.get(), text.data() + done, text.size() - done, MSG_NOSIGNAL);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
  }
}

}  // namespace kwd::daemon
