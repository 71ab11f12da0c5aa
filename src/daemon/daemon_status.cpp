#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kwd/daemon/daemon.hpp"
#include "kwd/metrics/exposition.hpp"
#include "kwd/metrics/textfile.hpp"
#include "kwd/platform/descriptors.hpp"
#include "kwd/platform/host.hpp"
#include "kwd/probes/process_identity.hpp"
#include "kwd/protocol/kernel_argv.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/private_files.hpp"
#include "kwd/watch/live_status.hpp"

// What the daemon tells: the status socket `kernel-watchdog status` reads, and the metrics.

namespace kwd::daemon {
sockaddr_un status_socket_address(const std::filesystem::path& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string p = path.string();
  if (p.size() >= sizeof addr.sun_path)
    throw std::runtime_error("socket path too long (" + std::to_string(p.size()) + " bytes): " + p);
  std::memcpy(addr.sun_path, p.c_str(), p.size() + 1);
  return addr;
}

bool Daemon::open_status_socket() {
  try {
    util::SafeDir::open_private(options_.status_socket.parent_path());
    const sockaddr_un addr = status_socket_address(options_.status_socket);
    util::UniqueFd probe(platform::cloexec_socket(AF_UNIX, SOCK_STREAM));
    if (probe &&
        ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) {
      spdlog::error("a kernel-watchdog daemon is already running (its socket {} answers)",
                    options_.status_socket.string());
      return false;
    }
    ::unlink(addr.sun_path);  // a socket left by a daemon that was killed
    util::UniqueFd fd(platform::cloexec_socket(AF_UNIX, SOCK_STREAM, true));
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

metrics::DaemonFigures Daemon::metrics_figures() const {
  metrics::DaemonFigures f;
  f.version = KWD_VERSION;
  for (const auto& [pid, k] : kernels_) {
    // A kernel whose death is counted is no longer one watched, in the same publication.
    if (ended_.contains({pid, k.process.start_time})) continue;
    metrics::KernelFigures figures;
    figures.kernel_id = k.kernel_id;
    figures.notebook = k.notebook;
    figures.kernel_name = k.kernel_name;
    figures.pid = pid;
    figures.state = watch::execution_state(*k.watch);
    if (k.container) {
      figures.namespace_name = k.container->namespace_name;
      figures.pod = k.container->pod_name;
      figures.container = k.container->container_name;
    }
    if (const auto* s = k.watch->timeline().latest()) {
      figures.rss_bytes = s->rss;
      figures.gpu_bytes = s->gpu_used;
    }
    for (const auto& l : watch::live_limits(*k.watch).all)
      figures.limits.push_back({l.name, l.bytes, l.used, l.time_to_limit_s});
    f.kernels.push_back(std::move(figures));
  }
  for (const auto& p : under_launcher_)
    if (std::filesystem::path(p.argv.empty() ? "" : p.argv[0]).filename() != "kernel-watchdog")
      ++f.kernels_under_launcher;
  f.kubernetes = options_.all_users;
  f.deaths_by_cause = deaths_by_cause_;
  f.reports_written = static_cast<std::int64_t>(reports_written_);
  f.last_death_by_cause = last_death_by_cause_;
  f.report_write_failures = static_cast<std::int64_t>(report_write_failures_);
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
        {"state", watch::execution_state(*k.watch)},
        {"uptime_s", (now - k.watch->started_at_ms()) / 1000}};
    if (k.container) row["kubernetes"] = k.container->to_json();
    row.update(watch::live_memory(*k.watch));
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
    util::UniqueFd client(platform::cloexec_accept(status_listener_.get()));
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
