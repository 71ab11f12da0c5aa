#include "kwd/launch/launcher.hpp"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>

#include "kwd/launch/mirror_exit.hpp"
#include "kwd/platform/resident_pages.hpp"
#include "kwd/protocol/kernel_argv.hpp"
#include "kwd/report/report_store.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/watch/flight_end.hpp"

namespace kwd::launch {
namespace {

// By then a kernel has almost always started and the listeners have connected: what start-up
// alone needed is behind us. (A fixed time; whatever runs after it is mapped back as used.)
constexpr std::chrono::seconds kSettledAfter{10};
constexpr std::chrono::seconds kLiveStatusInterval{1};

}  // namespace

Launcher::Launcher(RunOptions options) : options_(std::move(options)) {
  if (auto file = protocol::find_connection_file(options_.kernel.argv))
    options_.kernel.connection_file = protocol::resolve_connection_file(*file);
  options_.kernel.mode = "launcher";
  options_.kernel.passthrough = true;
}

Launcher::~Launcher() = default;

int Launcher::run() {
  // SIGPIPE: a closed stderr downstream must not kill us; write() reports EPIPE instead.
  ::signal(SIGPIPE, SIG_IGN);
  signals_ = std::make_unique<loop::SignalPipe>(
      std::initializer_list<int>{SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR2});

  // Where reports go is checked now so a problem is said at start, not at death; the kernel
  // starts whatever the answer.
  const auto report_dir = report::ReportStore::resolve_dir(options_.report_dir);
  try {
    report::ReportStore(report_dir).prepare();
  } catch (const std::exception& e) {
    if (watch::first_trouble_with(report_dir))
      spdlog::warn("report directory {} unusable ({}); reports will go to {}", report_dir.string(),
                   e.what(), report::ReportStore::fallback_dir().string());
  }

  kernel_ = std::make_unique<WatchedKernel>(loop_, options_.kernel);
  kernel_->set_sample_observer([this, report_dir] {
    if (!flight_ && !kernel_->dead())
      flight_.emplace(report_dir, kernel_->pid(), options_.kernel.connection_file,
                      options_.kernel.argv);
    if (flight_) flight_->observe(kernel_->watch());
  });
  try {
    kernel_->start(
        [this](const watch::ProcessEnd& end, std::int64_t at) { on_kernel_death(end, at); },
        [this](const protocol::HangEvidence& hang) {
          // One report per episode (the listener calls once per episode); the kernel is
          // alive and keeps being watched, and may still recover or die.
          kernel_->write_report(nullptr, hang.detected_at_ms, options_.report_dir,
                                watch::signal_names(received_));
        });
  } catch (const SpawnError& e) {
    spdlog::error("{}", e.what());
    if (e.error == ENOENT) return 127;
    if (e.error == EACCES || e.error == ENOEXEC) return 126;
    return 1;
  }
  loop_.watch_fd(signals_->fd(), [this] { on_signals(); });
  // Reports an earlier death left in the fallback location move into the store once it takes
  // writes again; looked at once the kernel is under way, not on its path to the start.
  // So do the kernels of watchdogs that died with them (watch/flight_end.hpp).
  (void)loop_.after(std::chrono::seconds(5), [report_dir] {
    const report::ReportStore store(report_dir, report::StoreLimits::from_environment());
    watch::adopt_waiting_reports(store);
    watch::report_orphaned_flights(store);
  });
  // The kernel's memory and state for readers beside its manager (JupyterLab's status item).
  live_status_.emplace(options_.kernel.connection_file);
  (void)loop_.every(
      kLiveStatusInterval, [this] { live_status_->refresh(kernel_->watch(), kernel_->pid()); },
      loop::EventLoop::Precision::coarse);
  // Once start-up has settled, the code that only loading and starting needed leaves our RSS.
  (void)loop_.after(kSettledAfter, [] {
    const std::size_t released = platform::release_unwritten_file_pages();
    spdlog::debug("start-up settled: {} KiB of unwritten file pages unmapped", released / 1024);
  });
  // A SIGCHLD that arrived before the loop started is already in the pipe.
  if (!loop_.run()) spdlog::error("event loop failed: {}", std::strerror(errno));

  // Only reachable if the loop failed: wait for the kernel and still end like it.
  const watch::ProcessEnd end = watch::ChildDeathSource(kernel_->pid()).wait();
  on_kernel_death(end, util::wall_ms());
  end_like(end);
}

void Launcher::on_signals() {
  for (int s : signals_->drain()) {
    if (s == SIGCHLD) continue;
    if (s == SIGUSR2) {
      spdlog::debug("the kernel's manager is ending the kernel; its end will not be reported");
      manager_is_ending_kernel_ = true;
      if (flight_) flight_->end_requested(kernel_->watch());
      continue;
    }
    received_.push_back({s, util::wall_ms()});
    if (s == SIGINT) {
      // The manager's killpg already delivered it to the kernel; passing it on would make
      // it a double interrupt. Launchers that signal our pid alone opt in.
      if (options_.forward_sigint) kernel_->send_signal(SIGINT);
      continue;
    }
    if (watch::is_termination_signal(s)) {
      spdlog::debug("received {}; waiting for the kernel to end", watch::signal_name(s));
      if (flight_) flight_->end_requested(kernel_->watch());
      if (!forward_timer_) {
        forward_timer_ = loop_.after(options_.forward_termination_after, [this, s] {
          spdlog::info("kernel still running {} ms after {}; passing it on",
                       options_.forward_termination_after.count(), watch::signal_name(s));
          kernel_->send_signal(s);
        });
      }
    }
  }
  // Calls on_kernel_death (and so never returns) once the kernel has ended.
  kernel_->check_death();
}

void Launcher::on_kernel_death(const watch::ProcessEnd& end, std::int64_t died_at_ms) {
  // Whatever goes wrong with the report, we end the way the kernel did.
  try {
    if (manager_is_ending_kernel_ ||
        watch::death_was_requested(end, kernel_->shutdown_requested(), received_, died_at_ms)) {
      spdlog::debug("kernel {} {} (requested); no report", kernel_->pid(),
                    end.status ? end.status->describe() : end.how_known);
    } else {
      kernel_->write_report(&end, died_at_ms, options_.report_dir, watch::signal_names(received_));
    }
  } catch (const std::exception& e) {
    spdlog::error("could not finish the crash report: {}", e.what());
  }
  if (live_status_) live_status_->remove();
  if (flight_) flight_->remove();  // reported here, or asked for: nothing left to find
  kernel_->remove_shim();  // after the report, which is due within milliseconds of the death
  kernel_->release_memory_limit();
  end_like(end);
}

void Launcher::end_like(const watch::ProcessEnd& end) {
  // Our own child is always reaped with its status; without one, say it as a failure.
  exit_like(end.status.value_or(watch::Termination{false, 1, 0, false}));
}

}  // namespace kwd::launch
