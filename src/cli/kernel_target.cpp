#include "kwd/cli/kernel_target.hpp"

#include <charconv>
#include <filesystem>

#include "kwd/probes/process_record.hpp"
#include "kwd/protocol/kernel_argv.hpp"

namespace kwd::cli {
namespace {

std::optional<pid_t> as_pid(const std::string& text) {
  pid_t pid = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), pid);
  if (ec != std::errc() || end != text.data() + text.size() || pid <= 0) return std::nullopt;
  return pid;
}

// The kernel a `run` launcher started: its child whose argv names the same connection file.
std::optional<pid_t> kernel_of_launcher(pid_t launcher) {
  for (pid_t pid : probes::list_processes()) {
    const auto record = probes::ProcessRecord::open(pid);
    if (!record) continue;
    const auto lineage = record->lineage();
    if (!lineage || lineage->ppid != launcher) continue;
    if (!protocol::is_watchdog_launcher(record->argv())) return pid;
  }
  return std::nullopt;
}

bool names(const std::string& target, const std::string& connection_file) {
  const std::filesystem::path file(connection_file);
  if (connection_file == target || file.filename().string() == target ||
      protocol::kernel_id_from_connection_file(connection_file) == target)
    return true;
  std::error_code ec1;
  std::error_code ec2;
  const auto a = std::filesystem::weakly_canonical(target, ec1);
  const auto b = std::filesystem::weakly_canonical(file, ec2);
  return !ec1 && !ec2 && a == b;
}

}  // namespace

std::optional<pid_t> find_kernel_process(const std::string& target, std::string& why) {
  if (const auto pid = as_pid(target)) {
    const auto record = probes::ProcessRecord::open(*pid);
    if (!record) {
      why = "no process " + target;
      return std::nullopt;
    }
    if (protocol::is_watchdog_launcher(record->argv())) {
      if (const auto kernel = kernel_of_launcher(*pid)) return kernel;
      why = "process " + target + " is a kernel-watchdog launcher with no kernel running";
      return std::nullopt;
    }
    return pid;
  }
  for (pid_t pid : probes::list_processes()) {
    const auto record = probes::ProcessRecord::open(pid);
    if (!record) continue;
    const auto argv = record->argv();
    if (argv.empty() || protocol::is_watchdog_launcher(argv)) continue;
    const auto file = protocol::find_connection_file(argv);
    if (file && names(target, *file)) return pid;
  }
  why = "no running kernel has the id or connection file '" + target +
        "' (give its pid; `kernel-watchdog status` lists the daemon's kernels)";
  return std::nullopt;
}

}  // namespace kwd::cli
