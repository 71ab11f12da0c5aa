#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "kwd/daemon/daemon.hpp"
#include "kwd/daemon/kernel_name.hpp"
#include "kwd/diagnosis/report_view.hpp"
#include "kwd/logging/log_fields.hpp"
#include "kwd/probes/process_identity.hpp"
#include "kwd/protocol/connection_file.hpp"
#include "kwd/protocol/kernel_argv.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/watch/death_policy.hpp"
#include "kwd/watch/report_writer.hpp"

// One kernel the daemon found: its Watch set up, and what its death or hang is told as.

namespace kwd::daemon {
namespace {

constexpr std::chrono::milliseconds kDaemonIdleSampleInterval{5000};

}  // namespace

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

}  // namespace kwd::daemon
