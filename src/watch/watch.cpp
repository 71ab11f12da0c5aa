#include "kwd/watch/watch.hpp"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "kwd/diagnosis/diagnose.hpp"
#include "kwd/fingerprint/make_fingerprint_probe.hpp"
#include "kwd/platform/memory_reuse.hpp"
#include "kwd/protocol/kernel_argv.hpp"
#include "kwd/report/report_document.hpp"
#include "kwd/timeline/trend.hpp"
#include "kwd/util/clock.hpp"

namespace kwd::watch {
namespace {

using nlohmann::json;

std::size_t samples_in(std::chrono::seconds window, std::chrono::milliseconds interval) {
  const auto n = std::chrono::duration_cast<std::chrono::milliseconds>(window).count() /
                 std::max<std::int64_t>(interval.count(), 1);
  return static_cast<std::size_t>(std::max<std::int64_t>(n, 16));
}

// Runs one collector of the report: whatever it throws, or a run past its budget, becomes a
// line of `problems` instead of the loss of the whole report.
class Collectors {
 public:
  explicit Collectors(std::chrono::milliseconds budget) : budget_ms_(budget.count()) {}

  template <typename F>
  void run(const std::string& name, F&& collect) {
    const std::int64_t t0 = util::steady_ns();
    try {
      collect();
    } catch (const std::exception& e) {
      problems_.push_back({{"collector", name}, {"problem", e.what()}});
    } catch (...) {
      problems_.push_back({{"collector", name}, {"problem", "unknown exception"}});
    }
    const std::int64_t took_ms = (util::steady_ns() - t0) / 1'000'000;
    if (took_ms > budget_ms_)
      problems_.push_back({{"collector", name},
                           {"problem", "took " + std::to_string(took_ms) + " ms (budget " +
                                           std::to_string(budget_ms_) + " ms)"}});
  }
  [[nodiscard]] const json& problems() const { return problems_; }

 private:
  std::int64_t budget_ms_;
  json problems_ = json::array();
};

// Samples miss the last climb of a kernel the OOM killer stopped: a cell that allocates a
// gigabyte a second outruns any sampling rate. The killer's own line measured the kernel's
// RSS at the kill, and the tree held at least that much, so the peak is at least that.
void fold_rss_at_kill(json& report) {
  const auto evidence = report.find("oom_evidence");
  const auto memory_at = report.find("memory");
  if (evidence == report.end() || !evidence->is_object() || memory_at == report.end() ||
      !memory_at->is_object())
    return;
  const auto at_kill = evidence->find("kernel_rss_at_kill_bytes");
  if (at_kill == evidence->end() || !at_kill->is_number_integer()) return;
  auto& memory = *memory_at;
  auto& peak = memory["peak"];
  const bool higher = !peak.contains("rss") || !peak["rss"].is_number() ||
                      peak["rss"].get<double>() < at_kill->get<double>();
  if (higher) peak["rss"] = *at_kill;
  memory["peak_rss_source"] = higher ? "oom_kill_line" : "samples";
}

}  // namespace

Watch::Watch(loop::EventLoop& loop, WatchOptions options, std::unique_ptr<DeathSource> death,
             DeathHandler on_death, HangHandler on_hang)
    : loop_(loop),
      options_(std::move(options)),
      death_(std::move(death)),
      on_death_(std::move(on_death)),
      on_hang_(std::move(on_hang)),
      // Before the full-rate window: one max-folded sample per 10 s for the last 2 hours.
      timeline_(samples_in(options_.full_rate_window, options_.sample_interval), 10'000, 720) {
  options_.probes.kernel_pid = options_.kernel_pid;
}

Watch::~Watch() {
  if (sample_timer_) loop_.cancel(*sample_timer_);
  if (death_retry_timer_) loop_.cancel(*death_retry_timer_);
  if (death_ && death_->fd() >= 0 && started_ && !dead_) loop_.unwatch_fd(death_->fd());
}

void Watch::add_probe(std::unique_ptr<probes::Probe> probe) {
  probes_.push_back(std::move(probe));
}

void Watch::start() {
  started_ = true;
  started_at_ms_ = util::wall_ms();
  // Where this process's memory stands before the kernel's first cell: the mark a flood is
  // measured from (cell_edge).
  if (options_.mode != "smoke") platform::give_freed_memory_back_if_grown();
  auto platform = probes::make_probes(options_.probes);
  if (options_.fingerprint)
    platform.push_back(fingerprint::make_fingerprint_probe(options_.kernel_pid));
  // The platform's first (the process tree updates who belongs to the kernel), then extras.
  std::move(probes_.begin(), probes_.end(), std::back_inserter(platform));
  probes_ = std::move(platform);
  for (const auto& p : probes_) {
    const auto st = p->status();
    // Debug, not info: "no NVIDIA driver" on a laptop is normal, and this line would land in
    // the Jupyter server's log at every kernel start. The report lists every probe's status.
    if (!st.available) spdlog::debug("probe {} unavailable: {}", st.name, st.reason);
  }
  // Fail open: the listener never throws out of start(); whatever it cannot do, it says
  // once and the process is watched regardless.
  auto listening = options_.listener;
  listening.kernel_at_rest = [this] { return !needs_full_rate(util::wall_ms()); };
  if (!protocol::answers_heartbeat_while_busy(options_.kernel_argv))
    listening.heartbeat.answered_while_busy = false;
  listener_ = std::make_unique<protocol::KernelListener>(
      loop_, options_.kernel_pid, options_.connection_file, std::move(listening), on_hang_,
      [this](bool running, bool sample, std::int64_t at_ms) { cell_edge(running, sample, at_ms); });
  if (options_.zmq_context) listener_->share_context(options_.zmq_context);
  listener_->start();
  if (death_->fd() >= 0) loop_.watch_fd(death_->fd(), [this] { on_death_fd(); });
  if (options_.first_sample_after.count() > 0)
    sample_timer_ = loop_.after(options_.first_sample_after, [this] { on_sample_timer(); });
  else
    on_sample_timer();
}

bool Watch::needs_full_rate(std::int64_t now_ms) const {
  // Memory that moved in the last few seconds may be on its way to a limit.
  constexpr std::int64_t kSettleMs = 5000;
  if (now_ms - rss_moved_at_ms_ < kSettleMs) return true;
  // Without IOPub (no connection file, or not yet connected) "idle" is never known; a process
  // whose ports have not opened after the first seconds is sampled at the idle rate (its
  // memory moving still brings the full rate back).
  if (!listener_) return true;
  if (listener_->ports_slow_to_open()) return false;
  const auto& state = listener_->activity().execution_state();
  // A kernel found after its last status (the daemon started after it went idle) never says
  // its state until its next cell. Silent on IOPub for 10 s, its memory flat, it is taken to
  // be at rest; a message, or its memory moving, brings the full rate back. (A cell that runs
  // on from before, silent and flat, then has its hang found in 30 s, not 6.)
  constexpr std::chrono::seconds kSilentAtRest{10};
  if (!state) return !listener_->iopub_silent_for(kSilentAtRest);
  return *state != "idle";
}

void Watch::on_sample_timer() {
  sample_timer_.reset();
  on_sample_tick();
  if (dead_) return;
  // An idle kernel's sample can be a little late: it waits for a wake-up it shares.
  const bool full_rate = needs_full_rate(util::wall_ms());
  const auto interval = full_rate
                            ? options_.sample_interval
                            : std::max(options_.sample_interval, options_.idle_sample_interval);
  sample_timer_ = loop_.after(
      interval, [this] { on_sample_timer(); },
      full_rate ? loop::EventLoop::Precision::exact : loop::EventLoop::Precision::coarse);
}

void Watch::sample_now() {
  on_sample_tick();
}

void Watch::cell_edge(bool running, bool sample, std::int64_t at_ms) {
  if (dead_) return;
  // A cell's end: memory an output flood took goes back (not smoke's: it keeps freed memory
  // for its next outputs, on purpose, and exits soon).
  if (!running && options_.mode != "smoke") platform::give_freed_memory_back_if_grown();
  for (auto& p : probes_) {
    try {
      p->on_cell_edge(running, at_ms, sample);
    } catch (const std::exception& e) {
      spdlog::debug("probe {}: {}", p->status().name, e.what());
    }
  }
  // An edge a moment after one that was sampled is not sampled again (a flood of tiny
  // executions costs little more than its messages).
  if (sample) on_sample_tick();
}

void Watch::kernel_dying() {
  if (dead_) return;
  for (auto& p : probes_) {
    try {
      p->on_kernel_dying();
    } catch (const std::exception& e) {
      spdlog::debug("probe {}: {}", p->status().name, e.what());
    }
  }
  on_sample_tick();
}

void Watch::cell_announced(std::int64_t execution_count, const std::string& code, bool truncated,
                           std::int64_t at_ms) {
  if (dead_ || !listener_) return;
  listener_->on_cell_announced(execution_count, code, truncated, at_ms);
}

void Watch::iopub_message(const protocol::Message& message) {
  if (listener_) listener_->on_iopub_message(message);
}

void Watch::on_sample_tick() {
  if (before_sample_) before_sample_();
  last_sample_ns_ = util::steady_ns();
  timeline::MemorySample sample;
  sample.t_ms = util::wall_ms();
  if (const auto step = clock_steps_.look(sample.t_ms, util::steady_ms()))
    spdlog::warn(
        "the wall clock stepped {} by {} s; the report's times differ by that much "
        "on either side of it",
        step->by_ms > 0 ? "forward" : "back", std::llabs(step->by_ms) / 1000);
  for (auto& p : probes_)
    p->sample(sample);
  if (sample.rss >= 0) {
    timeline_.add(sample);
    // "Moved": by more than 1 MiB and 2 % from where it had settled.
    const std::int64_t tolerance = std::max<std::int64_t>(1 << 20, flat_rss_ / 50);
    if (flat_rss_ < 0 || std::abs(sample.rss - flat_rss_) > tolerance) {
      flat_rss_ = sample.rss;
      rss_moved_at_ms_ = sample.t_ms;
    }
  }
  if (listener_) listener_->on_memory_sample(sample);
  if (after_sample_) after_sample_(sample);
}

void Watch::note_connection_file() {
  if (connection_file_at_death_ || options_.connection_file.empty()) return;
  if (options_.connection_file_present) {
    connection_file_at_death_ = options_.connection_file_present();
    return;
  }
  struct stat st {};
  connection_file_at_death_ = ::lstat(options_.connection_file.c_str(), &st) == 0;
}

void Watch::on_death_fd() {
  // A pidfd stays readable once the process is gone: look once, then on a short timer while
  // its status is not yet known (the parent has not reaped it).
  loop_.unwatch_fd(death_->fd());
  note_connection_file();
  check_death();
  if (!dead_)
    death_retry_timer_ = loop_.every(std::chrono::milliseconds(5), [this] { check_death(); });
}

void Watch::check_death() {
  if (dead_) return;
  const auto end = death_->check();
  if (!end) return;
  note_connection_file();
  dead_ = true;
  if (death_retry_timer_) {
    loop_.cancel(*death_retry_timer_);
    death_retry_timer_.reset();
  }
  finish(*end);
}

void Watch::finish(const ProcessEnd& end) {
  const std::int64_t died_at_ms = util::wall_ms();
  if (sample_timer_) {
    loop_.cancel(*sample_timer_);
    sample_timer_.reset();
  }
  // What the kernel published last (a shutdown_reply, its last outputs) may still be on its
  // way through libzmq's I/O thread. A dead process sends nothing more, so what is coming is
  // already in our socket buffers: a short quiet spell ends the wait. An exit status gets a
  // longer one, because a shutdown_reply decides whether it is a crash at all; after a fatal
  // signal only the last outputs are at stake, and the report is due within milliseconds.
  const bool clean = end.status && end.status->clean_exit();
  const std::int64_t drain_start_ns = util::steady_ns();
  if (listener_ && !clean) {
    const bool signaled = end.status && end.status->signaled;
    listener_->drain(std::chrono::milliseconds(signaled ? 5 : 20), std::chrono::milliseconds(150));
  }
  const std::int64_t probes_start_ns = util::steady_ns();
  probes::KernelExit how;
  if (end.status) how = {end.status->signaled, end.status->signal};
  for (auto& p : probes_) {
    try {
      p->on_kernel_exit(how);
    } catch (const std::exception& e) {
      spdlog::debug("probe {}: {}", p->status().name, e.what());
    }
  }
  spdlog::debug("kernel {} ended: its last messages read in {} us, the probes' last look {} us",
                pid(), (probes_start_ns - drain_start_ns) / 1000,
                (util::steady_ns() - probes_start_ns) / 1000);
  on_death_(end, died_at_ms);
}

bool Watch::shutdown_requested() const {
  return listener_ && listener_->shutdown_requested();
}

json Watch::live_facts() {
  json facts = json::object();
  for (const auto& p : probes_) {
    try {
      p->catch_up();
      p->contribute(facts);
    } catch (const std::exception&) {
      // A probe that cannot say now leaves its section out; the cell keeps its own error.
    }
  }
  return facts;
}

json Watch::build_report(const ReportContext& ctx, const std::string& id) {
  json r;
  Collectors collectors(options_.collector_budget);
  const ProcessEnd* end = ctx.end;
  const std::int64_t at_ms = ctx.at_ms;
  r["schema"] = report::kSchemaName;
  r["schema_version"] = report::kSchemaVersion;
  r["id"] = id;
  r["kind"] = end != nullptr ? "crash" : "hang";
  r["watchdog"] = {{"version", KWD_VERSION},
                   {"pid", ::getpid()},
                   {"mode", options_.mode},
                   {"faulthandler", ctx.faulthandler},
                   {"cell_announcements", ctx.cell_announcements}};
  if (clock_steps_.count() > 0) {
    json steps = json::array();
    for (const auto& step : clock_steps_.steps())
      steps.push_back({{"at_ms", step.at_ms}, {"by_ms", step.by_ms}});
    r["watchdog"]["clock_steps"] = {{"count", clock_steps_.count()}, {"steps", std::move(steps)}};
  }
  if (ctx.python_shim_ran)
    r["watchdog"]["python_shim"] = {
        {"ran", *ctx.python_shim_ran},
        {"why_not",
         ctx.python_shim_why_not.empty() ? json(nullptr) : json(ctx.python_shim_why_not)}};

  collectors.run("kernel", [&] {
    auto& kernel = r["kernel"];
    const std::string& file = options_.connection_file;
    kernel["argv"] = options_.kernel_argv;
    kernel["pid"] = options_.kernel_pid;
    kernel["connection_file"] = file.empty() ? json(nullptr) : json(file);
    kernel["kernel_id"] = protocol::kernel_id_from_connection_file(file);
    probes::KernelNotebook notebook = options_.notebook;
    if (listener_ && !listener_->jupyter_session().empty())
      notebook = {listener_->jupyter_session(), "connection_file"};
    kernel["notebook"] = notebook.path.empty() ? json(nullptr) : json(notebook.path);
    kernel["notebook_source"] = notebook.path.empty() ? json(nullptr) : json(notebook.source);
    kernel["started_at"] = util::iso8601_utc(started_at_ms_);
    kernel["died_at"] = end != nullptr ? json(util::iso8601_utc(at_ms)) : json(nullptr);
    kernel["started_at_ms"] = started_at_ms_;
    kernel["died_at_ms"] = end != nullptr ? json(at_ms) : json(nullptr);
    kernel["uptime_s"] = static_cast<double>(at_ms - started_at_ms_) / 1000.0;
  });

  collectors.run("termination", [&] {
    if (end == nullptr) {
      r["termination"] = nullptr;  // a hang report: the kernel is still alive
      return;
    }
    auto& term = r["termination"];
    if (end->status) {
      const Termination& t = *end->status;
      term["kind"] = t.signaled ? "signal" : "exit";
      term["exit_code"] = t.signaled ? json(nullptr) : json(t.exit_code);
      term["signal"] = t.signaled ? json(t.signal) : json(nullptr);
      term["signal_name"] = t.signaled ? json(signal_name(t.signal)) : json(nullptr);
      term["core_dumped"] = t.core_dumped;
      term["description"] = t.describe();
      term["returncode"] = t.popen_returncode();
    } else {
      term["kind"] = "unknown";
      term["exit_code"] = nullptr;
      term["signal"] = nullptr;
      term["signal_name"] = nullptr;
      term["core_dumped"] = false;
      term["description"] = "ended; how is not known: " + end->how_known;
      term["returncode"] = nullptr;
    }
    term["status_source"] = end->how_known;
    term["watchdog_received"] = ctx.watchdog_received;
  });

  collectors.run("memory", [&] {
    auto& memory = r["memory"];
    memory["interval_ms"] = options_.sample_interval.count();
    memory["idle_interval_ms"] =
        std::max(options_.sample_interval, options_.idle_sample_interval).count();
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
        recent.empty() ? json(nullptr) : json(at_ms - recent.back().t_ms);
  });

  collectors.run("stderr_tail", [&] {
    if (stderr_tail_ == nullptr) {
      r["stderr_tail"] = nullptr;  // not our child: its stderr is not ours to read
      return;
    }
    const auto& tail = *stderr_tail_;
    r["stderr_tail"] = {{"capacity", tail.capacity()},
                        {"bytes_total", tail.total_bytes()},
                        {"truncated", tail.total_bytes() > tail.size()},
                        {"text", tail.contents()},
                        {"arrivals", tail.arrival_times()}};
  });

  auto& probe_list = r["probes"] = json::array();
  for (const auto& p : probes_) {
    std::string name = "probe";
    collectors.run("probe", [&] {
      const auto st = p->status();
      name = st.name;
      probe_list.push_back({{"name", st.name}, {"available", st.available}, {"reason", st.reason}});
    });
    collectors.run("probe " + name, [&] { p->contribute(r); });
  }
  collectors.run("memory at the kill", [&] { fold_rss_at_kill(r); });
  if (listener_)
    collectors.run("listener", [&] { listener_->contribute(r, at_ms, end == nullptr); });
  if (ctx.sections.is_object())
    for (const auto& [name, section] : ctx.sections.items())
      r[name] = section;
  r["notes"] = ctx.notes;
  if (listener_)
    for (const auto& note : listener_->notes())
      r["notes"].push_back(note);
  r["problems"] = collectors.problems();
  diagnosis::complete_report(r);  // last: a pure function of everything above; never throws
  return r;
}

}  // namespace kwd::watch
