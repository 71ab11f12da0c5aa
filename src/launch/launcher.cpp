#include "kwd/launch/launcher.hpp"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "kwd/diagnosis/signature_table.hpp"
#include "kwd/launch/mirror_exit.hpp"
#include "kwd/protocol/kernel_argv.hpp"
#include "kwd/report/report_document.hpp"
#include "kwd/report/report_store.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/self_exe.hpp"
#include "kwd/util/size_parse.hpp"

extern char** environ;

namespace kwd::launch {

Launcher::Launcher(RunOptions options) : options_(std::move(options)) {
  if (auto file = protocol::find_connection_file(options_.kernel_argv))
    connection_file_ = protocol::resolve_connection_file(*file);
}

Launcher::~Launcher() = default;

std::vector<std::string> Launcher::kernel_environment() const {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "JPY_PARENT_PID=", 15) == 0) continue;
    env.emplace_back(*e);
  }
  // ipykernel watches this pid and exits when it goes away: that must be us, the process
  // the kernel manager knows.
  env.push_back("JPY_PARENT_PID=" + std::to_string(::getpid()));
  if (python_shim_) python_shim_->apply(env);
  return env;
}

void Launcher::start_kernel() {
  SpawnRequest request;
  request.argv = options_.kernel_argv;
  if (options_.memory_limit) {
    std::string problem;
    memory_limit_ = platform::make_memory_limit(*options_.memory_limit, problem);
    if (memory_limit_) {
      // The step that enters the cgroup is always there, so a missing kernel program is
      // found here, to fail the same way as without a limit.
      if (!util::find_on_path(request.argv.front()))
        throw SpawnError("cannot start " + request.argv.front() + ": " + std::strerror(ENOENT),
                         ENOENT);
      request.argv = memory_limit_->wrap_argv(options_.kernel_argv);
    } else {
      const std::string note =
          "--memory-limit " + util::format_bytes(static_cast<double>(*options_.memory_limit)) +
          " not applied: " + problem + "; the kernel runs without a memory limit";
      spdlog::error("{}", note);
      notes_.push_back(note);
    }
  }
  if (options_.faulthandler) {
    try {
      python_shim_ = faulthandler::PythonShim::create();
    } catch (const std::exception& e) {  // fail open: the kernel starts without it
      notes_.push_back(std::string("no Python traceback at a crash: ") + e.what());
      spdlog::warn("{}", notes_.back());
    }
  }
  request.environment = kernel_environment();
  auto child_stderr = stderr_->take_child_end();
  request.stderr_fd = child_stderr.get();
  sigemptyset(&request.reset_to_default);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD})
    sigaddset(&request.reset_to_default, s);
  child_.emplace(ChildProcess::spawn(request));
}

int Launcher::run() {
  // SIGPIPE: a closed stderr downstream must not kill us; write() reports EPIPE instead.
  ::signal(SIGPIPE, SIG_IGN);
  signals_ = std::make_unique<loop::SignalPipe>(
      std::initializer_list<int>{SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT});
  stderr_ = std::make_unique<StderrTee>(options_.stderr_buffer_bytes);

  // Where reports go is checked now so a problem is said at start, not at death; the kernel
  // starts whatever the answer.
  try {
    report::ReportStore(report::ReportStore::resolve_dir(options_.report_dir)).prepare();
  } catch (const std::exception& e) {
    spdlog::warn("report directory unusable ({}); reports will go to {}", e.what(),
                 report::ReportStore::fallback_dir().string());
  }

  try {
    start_kernel();
  } catch (const SpawnError& e) {
    spdlog::error("{}", e.what());
    if (e.error == ENOENT) return 127;
    if (e.error == EACCES || e.error == ENOEXEC) return 126;
    return 1;
  }
  spdlog::debug("kernel started: pid {}", child_->pid());

  watch::WatchOptions wo;
  wo.kernel_pid = child_->pid();
  wo.connection_file = connection_file_;
  wo.mode = "launcher";
  wo.kernel_argv = options_.kernel_argv;
  wo.sample_interval = options_.sample_interval;
  wo.full_rate_window = options_.full_rate_window;
  wo.listener = options_.listener;
  wo.probes.cgroup_path = memory_limit_ ? memory_limit_->cgroup_dir() : std::string();
  wo.probes.nvml_library = options_.nvml_library;
  wo.probes.gpu_interval = options_.gpu_interval;
  auto death = std::make_unique<watch::ChildDeathSource>(child_->pid());
  child_death_ = death.get();
  watch_ = std::make_unique<watch::Watch>(
      loop_, std::move(wo), std::move(death),
      [this](const watch::ProcessEnd& end, std::int64_t at) { on_kernel_death(end, at); },
      [this](const protocol::HangEvidence& hang) { on_hang(hang); });
  watch_->set_stderr_tail(&stderr_->tail());

  // Parse the signature table and compile its patterns now, off the death path (the
  // report must be on disk within milliseconds of the kernel's death).
  diagnosis::SignatureTable::active();
  watch_->start();
  last_words_ = watch::make_last_words(child_->pid(), stderr_->fd());
  last_words_timer_ =
      loop_.every(kLastWordsLookInterval, [this] { look_for_kernel_stderr_pipe(); });
  loop_.watch_fd(signals_->fd(), [this] { on_signals(); });
  loop_.watch_fd(stderr_->fd(), [this] { on_kernel_stderr(); });
  // A SIGCHLD that arrived before the loop started is already in the pipe.
  if (!loop_.run()) spdlog::error("event loop failed: {}", std::strerror(errno));

  // Only reachable if the loop failed: wait for the kernel and still end like it.
  const watch::ProcessEnd end = child_death_->wait();
  on_kernel_death(end, util::wall_ms());
  end_like(end);
}

void Launcher::on_kernel_stderr() {
  if (!stderr_->pump()) {
    loop_.unwatch_fd(stderr_->fd());
    return;
  }
  // What a kernel writes on fd 2 last is often its crash (faulthandler's traceback comes
  // before the fatal signal is re-raised): a sample now is the closest one to its death.
  // A flood of native log lines is sampled at most every kMinStderrSampleGapNs.
  if (util::steady_ns() - watch_->last_sample_ns() >= kMinStderrSampleGapNs) watch_->sample_now();
}

void Launcher::look_for_kernel_stderr_pipe() {
  // ipykernel makes its pipe while it starts (a second or so); a kernel that has not made
  // one by then keeps our pipe as its fd 2, and we read that ourselves.
  const bool done = last_words_->try_attach() || ++last_words_looks_ >= kLastWordsMaxLooks;
  if (done && last_words_timer_) {
    loop_.cancel(*last_words_timer_);
    last_words_timer_.reset();
  }
}

void Launcher::keep_last_words() {
  if (!last_words_) return;
  const std::string words = last_words_->drain(kLastWordsLimit);
  if (words.empty()) return;
  stderr_->inject(words);
  notes_.push_back("the last " + std::to_string(words.size()) +
                   " bytes the kernel wrote to stderr were still unread in ipykernel's stderr "
                   "pipe at its death; recovered from it");
}

void Launcher::on_hang(const protocol::HangEvidence& hang) {
  // One report per episode (the listener calls once per episode); the kernel is alive and
  // keeps being watched, and may still recover or die.
  write_report(nullptr, hang.detected_at_ms);
}

void Launcher::on_signals() {
  for (int s : signals_->drain()) {
    if (s == SIGCHLD) continue;
    received_.push_back({s, util::wall_ms()});
    if (s == SIGINT) {
      // The manager's killpg already delivered it to the kernel; passing it on would make
      // it a double interrupt. Launchers that signal our pid alone opt in.
      if (options_.forward_sigint) child_->send_signal(SIGINT);
      continue;
    }
    if (watch::is_termination_signal(s)) {
      spdlog::debug("received {}; waiting for the kernel to end", watch::signal_name(s));
      if (!forward_timer_) {
        forward_timer_ = loop_.after(options_.forward_termination_after, [this, s] {
          spdlog::info("kernel still running {} ms after {}; passing it on",
                       options_.forward_termination_after.count(), watch::signal_name(s));
          child_->send_signal(s);
        });
      }
    }
  }
  // Calls on_kernel_death (and so never returns) once the kernel has ended.
  watch_->check_death();
}

void Launcher::on_kernel_death(const watch::ProcessEnd& end, std::int64_t died_at_ms) {
  // Whatever goes wrong with the report, we end the way the kernel did.
  try {
    if (python_shim_) python_shim_->remove();
    stderr_->pump();  // whatever the kernel wrote last is already in the pipe
    keep_last_words();
    if (watch::death_was_requested(end, watch_->shutdown_requested(), received_, died_at_ms)) {
      spdlog::debug("kernel {} {} (requested); no report", child_->pid(),
                    end.status ? end.status->describe() : end.how_known);
    } else {
      write_report(&end, died_at_ms);
    }
  } catch (const std::exception& e) {
    spdlog::error("could not finish the crash report: {}", e.what());
  }
  release_memory_limit();
  end_like(end);
}

void Launcher::end_like(const watch::ProcessEnd& end) {
  // Our own child is always reaped with its status; without one, say it as a failure.
  exit_like(end.status.value_or(watch::Termination{false, 1, 0, false}));
}

void Launcher::release_memory_limit() {
  if (!memory_limit_) return;
  if (const auto problem = memory_limit_->release(); !problem.empty())
    spdlog::warn("kernel's memory cgroup: {}", problem);
}

void Launcher::write_report(const watch::ProcessEnd* end, std::int64_t at_ms) {
  const std::string id = report::make_report_id(
      at_ms, protocol::kernel_id_from_connection_file(connection_file_), child_->pid());
  const std::string what = end == nullptr ? "stopped answering heartbeats"
                           : end->status  ? end->status->describe()
                                          : "ended (" + end->how_known + ")";
  const char* kind = end != nullptr ? "crash" : "hang";
  watch::ReportContext context;
  context.end = end;
  context.at_ms = at_ms;
  context.watchdog_received = watch::signal_names(received_);
  context.faulthandler = python_shim_.has_value();
  context.notes = notes_;
  nlohmann::json document = watch_->build_report(context, id);
  const report::ReportStore primary(report::ReportStore::resolve_dir(options_.report_dir));
  try {
    const auto path = primary.write(id, report::to_text(document));
    spdlog::warn("kernel {} {}; {} report: {}", child_->pid(), what, kind, path.string());
    return;
  } catch (const std::exception& e) {
    spdlog::warn("cannot write the {} report to {}: {}", kind, primary.dir().string(), e.what());
    notes_.push_back(std::string("report directory unusable: ") + e.what());
  }
  const report::ReportStore fallback(report::ReportStore::fallback_dir());
  try {
    document["notes"].push_back(notes_.back());  // keeps the listener's notes too
    const auto path = fallback.write(id, report::to_text(document));
    spdlog::warn("kernel {} {}; {} report (fallback location): {}", child_->pid(), what, kind,
                 path.string());
  } catch (const std::exception& e) {
    spdlog::error("kernel {} {}; no {} report could be written: {}", child_->pid(), what, kind,
                  e.what());
  }
}

}  // namespace kwd::launch
