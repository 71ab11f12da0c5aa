#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>

#include "kwd/cli/commands.hpp"
#include "kwd/daemon/daemon.hpp"
#include "kwd/daemon/scheduling_priority.hpp"
#include "kwd/daemon/service_plan.hpp"
#include "kwd/platform/descriptors.hpp"
#include "kwd/platform/memory_reuse.hpp"
#include "kwd/platform/read_worker.hpp"
#include "kwd/report/terminal_text.hpp"
#include "kwd/util/private_files.hpp"
#include "kwd/util/size_parse.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::cli {
namespace {

// The daemon's answer on its status socket, or nullopt (with why) when none answers.
std::optional<nlohmann::json> ask_daemon(const std::filesystem::path& socket_path,
                                         std::string& why) {
  const std::string p = socket_path.string();
  sockaddr_un addr{};
  try {
    addr = daemon::status_socket_address(socket_path);
  } catch (const std::exception& e) {
    why = e.what();
    return std::nullopt;
  }
  util::UniqueFd fd(platform::cloexec_socket(AF_UNIX, SOCK_STREAM));
  if (!fd || ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    why = "no kernel-watchdog daemon is running (nothing answers on " + p + ": " +
          std::strerror(errno) + ")";
    return std::nullopt;
  }
  timeval timeout{5, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  std::string text;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  auto doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    why = "the daemon's answer on " + p + " is not JSON";
    return std::nullopt;
  }
  return doc;
}

std::string status_table(const nlohmann::json& doc) {
  std::string out =
      fmt::format("{:<14} {:>8} {:<9} {:>8} {:>10} {:>11} {:>10}  {:<10}  {}\n", "KERNEL", "PID",
                  "STATE", "UPTIME", "RSS", "RSS 60s", "GPU", "WATCHED BY", "NOTEBOOK");
  const auto bytes = [](const nlohmann::json& row, const char* key) -> std::string {
    if (!row.contains(key) || !row[key].is_number()) return "-";
    const double v = row[key].get<double>();
    return (v < 0 ? "-" : "") + util::format_bytes(std::abs(v));
  };
  for (const auto& row : doc.value("kernels", nlohmann::json::array())) {
    std::string id = row.value("kernel_id", std::string("?"));
    if (id.size() > 14) id = id.substr(0, 13) + "…";
    std::string change = bytes(row, "rss_change_60s_bytes");
    if (change != "-" && change.front() != '-') change = "+" + change;
    const auto notebook = row.contains("notebook") && row["notebook"].is_string()
                              ? row["notebook"].get<std::string>()
                              : std::string("-");
    out += fmt::format(
        "{:<14} {:>8} {:<9} {:>7}s {:>10} {:>11} {:>10}  {:<10}  {}\n", report::terminal_safe(id),
        row.value("pid", 0), report::terminal_safe(row.value("state", std::string("-"))),
        row.value("uptime_s", 0), bytes(row, "rss_bytes"), change, bytes(row, "gpu_bytes"),
        report::terminal_safe(row.value("watched_by", std::string("-"))),
        report::terminal_safe(notebook));
  }
  if (doc.value("kernels", nlohmann::json::array()).empty()) out += "(no kernels found)\n";
  const auto about = doc.value("daemon", nlohmann::json::object());
  if (about.contains("metrics_url") && about["metrics_url"].is_string())
    out += "metrics: " + report::terminal_safe(about["metrics_url"].get<std::string>()) + "\n";
  if (about.contains("metrics_textfile") && about["metrics_textfile"].is_string())
    out += "metrics file: " + report::terminal_safe(about["metrics_textfile"].get<std::string>()) +
           "\n";
  return out;
}

int run_command(const std::vector<std::string>& argv, bool dry_run) {
  std::string line;
  for (const auto& a : argv)
    line += (line.empty() ? "" : " ") + a;
  std::cout << (dry_run ? "would run: " : "running: ") << line << "\n";
  if (dry_run) return 0;
  std::string quoted;
  for (const auto& a : argv)
    quoted += "'" + a + "' ";
  return std::system(quoted.c_str()) == 0 ? 0 : 1;
}

}  // namespace

Command add_daemon_command(CLI::App& app) {
  auto options = std::make_shared<daemon::DaemonOptions>();
  auto runtime_dirs = std::make_shared<std::vector<std::string>>();
  auto sample_hz = std::make_shared<double>(1.0);
  auto* cmd = app.add_subcommand(
      "daemon",
      "Watch every Jupyter kernel of this user, wrapped or not (the background service).\n"
      "Kernels are found when their connection file appears in a runtime dir, when their\n"
      "process exec's (Linux's process-events connector: any user may listen from Linux 6.6,\n"
      "root or CAP_NET_ADMIN before) and by a scan of the process table every second\n"
      "(nbclient and scripts keep their connection files in the temp dir).\n"
      "A kernel already under `kernel-watchdog run` is left to it: one report per death.\n"
      "SIGHUP rescans; SIGTERM stops. `kernel-watchdog status` shows what is watched.");
  cmd->footer(
      "Examples:\n"
      "  kernel-watchdog daemon                      # what `service install` runs\n"
      "  kernel-watchdog daemon --log-format json --metrics-address 127.0.0.1:9464\n"
      "  kernel-watchdog daemon --all-users --report-dir /var/lib/kernel-watchdog/reports\n"
      "      # a Kubernetes node, as root (deploy/kubernetes/ runs it so, with its metrics\n"
      "      # on the pod's own address, which only the cluster reaches)");
  cmd->add_option("--runtime-dir", *runtime_dirs,
                  "Where connection files appear (repeatable; replaces the defaults: "
                  "$JUPYTER_RUNTIME_DIR or the Jupyter data dir's runtime/, and "
                  "$XDG_RUNTIME_DIR/jupyter/runtime)");
  cmd->add_option("--report-dir", options->report_dir,
                  "Where crash reports go (default: the store `run` uses)");
  cmd->add_option("--status-socket", options->status_socket,
                  "The socket `status` asks (default: $XDG_RUNTIME_DIR/kernel-watchdog/"
                  "daemon.sock, else next to the report store)");
  cmd->add_option("--sample-rate", *sample_hz, "Memory samples per second, per kernel")
      ->check(CLI::Range(0.1, 100.0))
      ->capture_default_str();
  cmd->add_option("--nvml-library", options->nvml_library,
                  "NVIDIA's libnvidia-ml to load (default: libnvidia-ml.so.1)")
      ->envname("KERNEL_WATCHDOG_NVML");
  auto scan_seconds = std::make_shared<double>(1.0);
  cmd->add_option("--scan-interval", *scan_seconds,
                  "Seconds between full scans of the process table (they find kernels that no "
                  "directory watch or process event announced)")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  cmd->add_option("--metrics-address", options->metrics_address,
                  "Serve Prometheus metrics at http://HOST:PORT/metrics (e.g. 127.0.0.1:9464; "
                  "off unless given; no authentication, so keep it on a loopback address)");
  cmd->add_option("--metrics-textfile", options->metrics_textfile,
                  "Also write the metrics to this file, atomically, for node_exporter's "
                  "textfile collector (e.g. /var/lib/node_exporter/textfile/kernel-watchdog.prom)");
  cmd->add_flag("--all-users", options->all_users,
                "The node's daemon (root, in the host's PID namespace): kernels of every user "
                "and container, found in the host's process table; connection files read "
                "through each kernel's own root (/proc/PID/root); a kernel in a Kubernetes "
                "pod's container named by namespace, pod and container (from its cgroup and "
                "the kubelet's records, no API server), its reports under REPORT_DIR/"
                "NAMESPACE/POD/ and each also one JSON line on stdout");
  auto kubelet_root = std::make_shared<std::string>("/var/lib/kubelet");
  cmd->add_option("--kubelet-root", *kubelet_root,
                  "The kubelet's directory, whose pods/UID/ records name pods and containers "
                  "(with --all-users)")
      ->capture_default_str();
  auto nice = std::make_shared<int>(-10);
  cmd->add_option("--nice", *nice,
                  "Scheduling priority to ask for (a nice value): taken where allowed (root, "
                  "CAP_SYS_NICE, RLIMIT_NICE), else the daemon runs at its own. Above the kernels "
                  "it watches, it finds new ones in time while many start at once on few cores; "
                  "it uses well under 1% of a core. 0 or more: no change. Under Linux's "
                  "autogroup scheduling, its session too when it leads one (as a service does)")
      ->check(CLI::Range(-20, 19))
      ->capture_default_str();
  auto log_format = std::make_shared<std::string>();
  cmd->add_option("--log-format", *log_format,
                  "text or json: one object a line with kernel_id, cause and report fields "
                  "(as the global --log-format; under systemd the journal gets those fields "
                  "by default)")
      ->check(CLI::IsMember({"text", "json"}));
  return {
      cmd, [=]() -> int {
        if (!log_format->empty()) {
          const auto level = spdlog::level::to_string_view(spdlog::get_level());
          setup_logging(std::string(level.data(), level.size()), *log_format);
        }
        options->node.kubelet_root = *kubelet_root;
        if (options->all_users && ::geteuid() != 0)
          spdlog::warn("--all-users without root: other users' kernels cannot be read or watched");
        for (const auto& d : *runtime_dirs)
          options->runtime_dirs.push_back(std::filesystem::absolute(d));
        options->scan_interval =
            std::chrono::milliseconds(static_cast<long>(*scan_seconds * 1000.0));
        options->sample_interval =
            std::chrono::milliseconds(std::max<long>(10, static_cast<long>(1000.0 / *sample_hz)));
        // Before the daemon's threads (ZeroMQ's, NVML's) start: they take this one's.
        spdlog::info("{}", daemon::raise_scheduling_priority(*nice));
        if (const auto session = daemon::raise_session_priority(*nice); !session.empty())
          spdlog::info("{}", session);
        platform::return_large_blocks_at_once();
        int status = 0;
        {
          daemon::Daemon d(*options);
          status = d.run();
        }
        // Its kernels' lookups, still running, end before the exit destroys what they use.
        platform::ReadWorker::settle(std::chrono::seconds(1));
        return status;
      }};
}

Command add_status_command(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  auto socket_path = std::make_shared<std::string>();
  auto report_dir = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand(
      "status",
      "What the running daemon watches: one row per kernel (id, pid, state, uptime, RSS and\n"
      "its change over the last minute, GPU memory, watched by daemon or launcher).");
  cmd->footer("Example: kernel-watchdog status --json");
  cmd->add_flag("--json", *json, "The daemon's answer as JSON");
  cmd->add_option("--status-socket", *socket_path, "The daemon's socket (as `daemon`)");
  cmd->add_option("--report-dir", *report_dir, "As given to `daemon`, to find its socket");
  return {cmd, [=]() -> int {
            const std::filesystem::path path = socket_path->empty()
                                                   ? daemon::default_status_socket(*report_dir)
                                                   : std::filesystem::path(*socket_path);
            std::string why;
            const auto doc = ask_daemon(path, why);
            if (!doc) {
              std::cerr << "kernel-watchdog status: " << why << "\n";
              return 3;
            }
            std::cout << (*json ? doc->dump(2) + "\n" : status_table(*doc));
            return 0;
          }};
}

Command add_service_command(CLI::App& app) {
  auto dry_run = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand(
      "service",
      "Install the daemon as a service of this user: a systemd user unit on Linux\n"
      "(~/.config/systemd/user/kernel-watchdog.service), a launchd agent on macOS; logs in\n"
      "`journalctl --user -u kernel-watchdog` (Linux).");
  cmd->require_subcommand(1);
  auto* install = cmd->add_subcommand("install", "Write the unit and enable it now");
  auto* uninstall = cmd->add_subcommand("uninstall", "Stop, disable and remove it");
  auto* status = cmd->add_subcommand("status", "The service manager's view of it");
  for (auto* sub : {install, uninstall, status})
    sub->add_flag("--dry-run", *dry_run, "Print the file and the commands instead");
  cmd->footer(
      "Example: kernel-watchdog service install --dry-run   # see the unit, change nothing");
  install->footer("Example: kernel-watchdog service install && kernel-watchdog status");
  uninstall->footer("Example: kernel-watchdog service uninstall --dry-run");
  status->footer("Example: kernel-watchdog service status");
  return {cmd, [=]() -> int {
            const daemon::ServicePlan plan = daemon::service_plan();
            if (install->parsed()) {
              if (*dry_run) {
                std::cout << "would write " << plan.file.string() << ":\n" << plan.contents;
              } else {
                try {
                  std::filesystem::create_directories(plan.file.parent_path());
                  util::write_file_atomically(plan.file.parent_path(),
                                              plan.file.filename().string(), plan.contents, 0644);
                  std::cout << "wrote " << plan.file.string() << "\n";
                } catch (const std::exception& e) {
                  std::cerr << "kernel-watchdog service install: " << e.what() << "\n";
                  return 1;
                }
              }
              for (const auto& c : plan.install)
                if (run_command(c, *dry_run) != 0) return 1;
              return 0;
            }
            if (uninstall->parsed()) {
              for (const auto& c : plan.uninstall)
                run_command(c, *dry_run);  // a unit that was not running is fine
              std::cout << (*dry_run ? "would remove " : "removing ") << plan.file.string() << "\n";
              if (!*dry_run) std::filesystem::remove(plan.file);
              return 0;
            }
            for (const auto& c : plan.status)
              run_command(c, *dry_run);
            return 0;
          }};
}

}  // namespace kwd::cli
