#include "kwd/supervisor/supervisor.hpp"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "kwd/diagnosis/diagnose.hpp"
#include "kwd/diagnosis/signature_table.hpp"
#include "kwd/fingerprint/make_fingerprint_probe.hpp"
#include "kwd/report/report_document.hpp"
#include "kwd/report/report_store.hpp"
#include "kwd/supervisor/kernel_argv.hpp"
#include "kwd/supervisor/mirror_exit.hpp"
#include "kwd/timeline/trend.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/private_files.hpp"
#include "kwd/util/self_exe.hpp"
#include "kwd/util/size_parse.hpp"

extern char** environ;

namespace kwd::supervisor {
namespace {

bool is_termination_signal(int s) {
  return s == SIGTERM || s == SIGHUP || s == SIGQUIT;
}

std::size_t samples_in(std::chrono::seconds window, std::chrono::milliseconds interval) {
  const auto n = std::chrono::duration_cast<std::chrono::milliseconds>(window).count() /
                 std::max<std::int64_t>(interval.count(), 1);
  return static_cast<std::size_t>(std::max<std::int64_t>(n, 16));
}

}  // namespace

Supervisor::Supervisor(RunOptions options)
    : options_(std::move(options)),
      // Before the full-rate window: one max-folded sample per 10 s for the last 2 hours.
      timeline_(samples_in(options_.full_rate_window, options_.sample_interval), 10'000, 720) {
  if (auto file = find_connection_file(options_.kernel_argv))
    connection_file_ = resolve_connection_file(*file);
}

Supervisor::~Supervisor() = default;

std::vector<std::string> Supervisor::kernel_environment() const {
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

void Supervisor::start_kernel() {
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
  started_at_ms_ = util::wall_ms();
}

int Supervisor::run() {
  // SIGPIPE: a closed stderr downstream must not kill us; write() reports EPIPE instead.
  ::signal(SIGPIPE, SIG_IGN);
  signals_ = std::make_unique<SignalPipe>(
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

  probes::ProbeOptions probe_options;
  probe_options.kernel_pid = child_->pid();
  probe_options.cgroup_path = memory_limit_ ? memory_limit_->cgroup_dir() : std::string();
  probe_options.nvml_library = options_.nvml_library;
  probe_options.gpu_interval = options_.gpu_interval;
  probes_ = probes::make_probes(probe_options);
  probes_.push_back(fingerprint::make_fingerprint_probe(child_->pid()));
  for (const auto& p : probes_) {
    const auto st = p->status();
    // Debug, not info: "no NVIDIA driver" on a laptop is normal, and this line would land in
    // the Jupyter server's log at every kernel start. The report lists every probe's status.
    if (!st.available) spdlog::debug("probe {} unavailable: {}", st.name, st.reason);
  }

  // Parse the signature table and compile its patterns now, off the death path (the
  // report must be on disk within milliseconds of the kernel's death).
  diagnosis::SignatureTable::active();
  start_listening();
  loop_.watch_fd(signals_->fd(), [this] { on_signals(); });
  loop_.watch_fd(stderr_->fd(), [this] { on_kernel_stderr(); });
  loop_.every(options_.sample_interval, [this] { on_sample_tick(); });
  on_sample_tick();
  // A SIGCHLD that arrived before the loop started is already in the pipe.
  if (!loop_.run()) spdlog::error("event loop failed: {}", std::strerror(errno));

  // Only reachable if the loop failed: wait for the kernel and still end like it.
  const Termination end = child_->wait();
  on_kernel_exit(end);
  exit_like(end);
}

void Supervisor::on_kernel_stderr() {
  if (!stderr_->pump()) {
    loop_.unwatch_fd(stderr_->fd());
    return;
  }
  // What a kernel writes on fd 2 last is often its crash (faulthandler's traceback comes
  // before the fatal signal is re-raised): a sample now is the closest one to its death.
  // A flood of native log lines is sampled at most every kMinStderrSampleGapNs.
  if (util::steady_ns() - last_sample_ns_ >= kMinStderrSampleGapNs) on_sample_tick();
}

void Supervisor::on_sample_tick() {
  last_sample_ns_ = util::steady_ns();
  timeline::MemorySample sample;
  sample.t_ms = util::wall_ms();
  for (auto& p : probes_)
    p->sample(sample);
  if (sample.rss >= 0) timeline_.add(sample);
  if (listener_) listener_->on_memory_sample(sample);
}

void Supervisor::start_listening() {
  // Fail open: the listener never throws out of start(); whatever it cannot do, it says once
  // and the process is watched regardless.
  listener_ = std::make_unique<protocol::KernelListener>(
      loop_, child_->pid(), connection_file_, options_.listener,
      [this](const protocol::HangEvidence& hang) { on_hang(hang); }, [this] { on_sample_tick(); });
  listener_->start();
}

void Supervisor::on_hang(const protocol::HangEvidence& hang) {
  // One report per episode (the listener calls once per episode); the kernel is alive and
  // keeps being watched, and may still recover or die.
  write_report(nullptr, hang.detected_at_ms);
}

void Supervisor::on_signals() {
  for (int s : signals_->drain()) {
    if (s == SIGCHLD) continue;
    if (s == SIGINT) {
      // The manager's killpg already delivered it to the kernel; passing it on would make
      // it a double interrupt. Launchers that signal our pid alone opt in.
      if (options_.forward_sigint) child_->send_signal(SIGINT);
      continue;
    }
    if (is_termination_signal(s)) {
      received_signals_.push_back(s);
      if (!termination_requested_ms_) termination_requested_ms_ = util::wall_ms();
      spdlog::debug("received {}; waiting for the kernel to end", signal_name(s));
      if (!forward_timer_) {
        forward_timer_ = loop_.after(options_.forward_termination_after, [this, s] {
          spdlog::info("kernel still running {} ms after {}; passing it on",
                       options_.forward_termination_after.count(), signal_name(s));
          child_->send_signal(s);
        });
      }
    }
  }
  if (const auto end = child_->try_reap()) {
    // Whatever goes wrong with the report, we end the way the kernel did.
    try {
      on_kernel_exit(*end);
    } catch (const std::exception& e) {
      spdlog::error("could not finish the crash report: {}", e.what());
    }
    exit_like(*end);
  }
}

bool Supervisor::death_was_requested(const Termination& end) const {
  if (end.clean_exit()) return true;
  // The kernel published shutdown_reply: the manager asked it to stop, whatever it exited
  // with afterwards (atexit handlers, a killpg after the grace period...).
  if (listener_ && listener_->shutdown_requested()) return true;
  if (!received_signals_.empty() && end.signaled) {
    // The manager shut us both down (killpg): the kernel died of what we were sent.
    for (int s : received_signals_)
      if (s == end.signal) return true;
    if (end.signal == SIGKILL) return true;  // escalation after a requested termination
  }
  return false;
}

void Supervisor::on_kernel_exit(const Termination& end) {
  const std::int64_t died_at_ms = util::wall_ms();
  if (python_shim_) python_shim_->remove();
  stderr_->pump();  // whatever the kernel wrote last is already in the pipe
  // What the kernel published last (a shutdown_reply, its last outputs) may still be on its
  // way through libzmq's I/O thread. A dead process sends nothing more, so what is coming is
  // already in our socket buffers: a short quiet spell ends the wait. An exit status gets a
  // longer one, because a shutdown_reply decides whether it is a crash at all; after a fatal
  // signal only the last outputs are at stake, and the report is due within milliseconds.
  if (listener_ && !end.clean_exit()) {
    const auto quiet = std::chrono::milliseconds(end.signaled ? 5 : 20);
    listener_->drain(quiet, std::chrono::milliseconds(150));
  }
  if (death_was_requested(end)) {
    spdlog::debug("kernel {} {} (requested); no report", child_->pid(), end.describe());
    release_memory_limit();
    return;
  }
  const probes::KernelExit how{end.signaled, end.signal};
  for (auto& p : probes_)
    p->on_kernel_exit(how);
  write_report(&end, died_at_ms);
  release_memory_limit();
}

void Supervisor::release_memory_limit() {
  if (!memory_limit_) return;
  if (const auto problem = memory_limit_->release(); !problem.empty())
    spdlog::warn("kernel's memory cgroup: {}", problem);
}

nlohmann::json Supervisor::build_report(const Termination* end, std::int64_t died_at_ms,
                                        const std::string& id) {
  using nlohmann::json;
  json r;
  r["schema"] = report::kSchemaName;
  r["schema_version"] = report::kSchemaVersion;
  r["id"] = id;
  r["kind"] = end != nullptr ? "crash" : "hang";
  r["watchdog"] = {{"version", KWD_VERSION}, {"pid", ::getpid()}, {"mode", "launcher"}};

  auto& kernel = r["kernel"];
  kernel["argv"] = options_.kernel_argv;
  kernel["pid"] = child_->pid();
  kernel["connection_file"] = connection_file_.empty() ? json(nullptr) : json(connection_file_);
  kernel["kernel_id"] = kernel_id_from_connection_file(connection_file_);
  kernel["started_at"] = util::iso8601_utc(started_at_ms_);
  kernel["died_at"] = end != nullptr ? json(util::iso8601_utc(died_at_ms)) : json(nullptr);
  kernel["started_at_ms"] = started_at_ms_;
  kernel["died_at_ms"] = end != nullptr ? json(died_at_ms) : json(nullptr);
  kernel["uptime_s"] = static_cast<double>(died_at_ms - started_at_ms_) / 1000.0;

  if (end != nullptr) {
    auto& term = r["termination"];
    term["kind"] = end->signaled ? "signal" : "exit";
    term["exit_code"] = end->signaled ? json(nullptr) : json(end->exit_code);
    term["signal"] = end->signaled ? json(end->signal) : json(nullptr);
    term["signal_name"] = end->signaled ? json(signal_name(end->signal)) : json(nullptr);
    term["core_dumped"] = end->core_dumped;
    term["description"] = end->describe();
    term["returncode"] = end->popen_returncode();
    auto& got = term["watchdog_received"] = json::array();
    for (int s : received_signals_)
      got.push_back(signal_name(s));
  } else {
    r["termination"] = nullptr;  // a hang report: the kernel is still alive
  }

  auto& memory = r["memory"];
  memory["interval_ms"] = options_.sample_interval.count();
  memory["full_rate_window_s"] = options_.full_rate_window.count();
  const auto recent = timeline_.recent();
  memory["samples"] = timeline::samples_to_json(recent);
  memory["older_samples"] = timeline::samples_to_json(timeline_.coarse());
  auto& peak = memory["peak"] = json::object();
  for (const auto& f : timeline::kSeriesFields)
    if (timeline_.peak().*f.member >= 0) peak[std::string(f.name)] = timeline_.peak().*f.member;
  memory["trend"] = timeline::trends_to_json(timeline::compute_trends(timeline_));
  memory["limits"] = timeline::limits_to_json(timeline::compute_limits(recent));
  memory["last_sample_before_death_ms"] =
      recent.empty() ? json(nullptr) : json(died_at_ms - recent.back().t_ms);

  const auto& tail = stderr_->tail();
  r["stderr_tail"] = {{"capacity", tail.capacity()},
                      {"bytes_total", tail.total_bytes()},
                      {"truncated", tail.total_bytes() > tail.size()},
                      {"text", tail.contents()}};

  auto& probe_list = r["probes"] = json::array();
  for (const auto& p : probes_) {
    const auto st = p->status();
    probe_list.push_back({{"name", st.name}, {"available", st.available}, {"reason", st.reason}});
    p->contribute(r);
  }
  if (listener_) listener_->contribute(r, died_at_ms, /*with_hang=*/end == nullptr);
  r["notes"] = notes_;
  if (listener_)
    for (const auto& note : listener_->notes())
      r["notes"].push_back(note);
  r["watchdog"]["faulthandler"] = python_shim_.has_value();
  diagnosis::complete_report(r);  // last: a pure function of everything above
  return r;
}

void Supervisor::write_report(const Termination* end, std::int64_t died_at_ms) {
  const std::string id = report::make_report_id(
      died_at_ms, kernel_id_from_connection_file(connection_file_), child_->pid());
  const std::string what = end != nullptr ? end->describe() : "stopped answering heartbeats";
  const char* kind = end != nullptr ? "crash" : "hang";
  const report::ReportStore primary(report::ReportStore::resolve_dir(options_.report_dir));
  nlohmann::json document;
  try {
    document = build_report(end, died_at_ms, id);
  } catch (const std::exception& e) {
    spdlog::error("could not assemble the {} report: {}", kind, e.what());
    return;
  }
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

}  // namespace kwd::supervisor
