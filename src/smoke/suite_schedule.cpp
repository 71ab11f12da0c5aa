#include "kwd/smoke/suite_schedule.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <iostream>

#include "kwd/diagnosis/causes.hpp"
#include "kwd/report/terminal_text.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/size_parse.hpp"

namespace kwd::smoke {
namespace {

// Killed by the OOM killer, of a cgroup's limit or of the whole machine's memory.
bool oom_killed(const NotebookResult& result) {
  return result.outcome == Outcome::died && diagnosis::is_oom_kill(result.cause);
}

void say(const std::string& line) {
  std::cerr << "kernel-watchdog smoke: " << report::terminal_safe(line) << "\n" << std::flush;
}

}  // namespace

SuiteSchedule::SuiteSchedule(loop::EventLoop& loop, zmq::context_t& zmq,
                             const SmokeOptions& options,
                             std::shared_ptr<probes::HostSources> host_sources,
                             std::vector<Entry> entries, std::optional<std::int64_t> budget,
                             std::size_t ceiling, std::vector<SmokeGpu> gpus,
                             ResultHandler on_result, std::function<void()> on_all_done)
    : loop_(loop),
      zmq_(zmq),
      options_(options),
      host_sources_(std::move(host_sources)),
      admission_(budget, ceiling, std::move(gpus)),
      on_result_(std::move(on_result)),
      on_all_done_(std::move(on_all_done)) {
  const auto now = util::steady_ns();
  for (auto& entry : entries) {
    admission_.enqueue(entry.job);
    Slot slot;
    slot.entry = std::move(entry);
    slot.queued_ns = now;
    slots_.push_back(std::move(slot));
  }
}

SuiteSchedule::~SuiteSchedule() {
  if (memory_timer_) loop_.cancel(*memory_timer_);
}

void SuiteSchedule::start() {
  if (admission_.budget())
    memory_timer_ = loop_.every(std::chrono::milliseconds(100), [this] { watch_memory(); });
  start_more();
}

void SuiteSchedule::check_death() {
  for (auto& slot : slots_)
    if (slot.run) slot.run->check_death();
  for (auto& run : retired_)
    run->check_death();
}

std::vector<RunningJob> SuiteSchedule::running() const {
  std::vector<RunningJob> out;
  for (const auto& slot : slots_) {
    // One being stopped still holds its memory until it is dead: it is counted till then.
    if (!slot.run || slot.run->done()) continue;
    RunningJob r;
    r.job = slot.entry.job;
    r.used = slot.run->current_rss();
    r.peak = slot.run->result().peak_rss.value_or(0);
    r.started_ns = slot.started_ns;
    r.gpu = slot.gpu;
    r.gpu_peak = slot.run->result().peak_gpu.value_or(0);
    out.push_back(std::move(r));
  }
  return out;
}

const NotebookRun* SuiteSchedule::first_running() const {
  for (const auto& slot : slots_)
    if (slot.run && !slot.run->done()) return slot.run.get();
  return nullptr;
}

void SuiteSchedule::start_more() {
  for (;;) {
    const auto now_running = running();
    auto decision = admission_.next(now_running, util::steady_ns());
    if (decision.start) {
      launch(std::move(*decision.start), decision.gpu);
      continue;
    }
    // Said once per wait: the same notebook waiting on the same company is not news.
    std::string key;
    if (!decision.waits.empty()) {
      key = std::to_string(admission_.queue().front().index);
      for (const auto& r : now_running)
        key += "," + std::to_string(r.job.index);
      if (key != last_wait_) say(decision.waits);
    }
    last_wait_ = key;
    return;
  }
}

void SuiteSchedule::launch(Job job, std::optional<std::size_t> gpu) {
  Slot& slot = slots_[job.index];
  const auto now = util::steady_ns();
  const auto beside = running();
  slot.waited_s += static_cast<double>(now - slot.queued_ns) / 1e9;
  slot.started_ns = now;
  // Notebooks come to run side by side only here, when one starts beside others.
  slot.packed = !beside.empty();
  slot.shared_gpu = false;
  for (const auto& r : beside) {
    slots_[r.job.index].packed = true;
    if (gpu && r.gpu == gpu) slots_[r.job.index].shared_gpu = slot.shared_gpu = true;
  }
  slot.admitted_estimate = job.estimate;
  slot.gpu = gpu;
  slot.entry.job = std::move(job);
  const std::size_t index = slot.entry.job.index;
  // A copy: a notebook stopped to run again starts from its document as it was read.
  slot.run = std::make_unique<NotebookRun>(
      loop_, zmq_, options_, host_sources_, slot.entry.notebook, slot.entry.spec,
      slot.entry.executed_name, [this, index] { on_run_done(index); });
  if (gpu) slot.run->set_environment(gpu_environment(admission_.gpus()[*gpu]));
  slot.run->start();
}

void SuiteSchedule::watch_memory() {
  const auto now_running = running();
  // While one is being stopped its memory is about to come back: no second one is stopped
  // for the same excess (it is still counted until it is dead, so nothing starts in its place).
  const bool stop_pending =
      std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.stopping; });
  if (const auto victim = stop_pending ? std::nullopt : admission_.over_budget(now_running)) {
    Slot& slot = slots_[*victim];
    std::string beside;
    std::int64_t used = 0, together = 0;
    for (const auto& r : now_running) {
      together += r.used;
      if (r.job.index == *victim)
        used = r.used;
      else
        beside += (beside.empty() ? "" : ", ") + r.job.name;
    }
    run_again(slot, fmt::format("stopped at {}: with {} beside it the kernels held {} of the {} "
                                "budget",
                                util::format_bytes(used), beside, util::format_bytes(together),
                                util::format_bytes(*admission_.budget())));
  }
  start_more();
}

void SuiteSchedule::run_again(Slot& slot, std::string why) {
  say(fmt::format("{}: {}; it runs again alone", slot.entry.job.name, why));
  slot.requeues.push_back(std::move(why));
  slot.stopping = true;
  slot.run->stop_to_run_again();  // its end comes through on_run_done
}

bool SuiteSchedule::oom_kill_of_ours(const Slot& slot) const {
  if (!admission_.budget() || options_.memory_limit || !slot.packed || slot.oom_ran_again)
    return false;
  return oom_killed(slot.run->result());
}

bool SuiteSchedule::gpu_oom_of_ours(const Slot& slot) const {
  if (!admission_.budget() || !slot.gpu || !slot.shared_gpu || slot.gpu_oom_ran_again) return false;
  const auto& cells = slot.run->result().cells;
  return std::any_of(cells.begin(), cells.end(), [](const CellResult& c) {
    return c.status == CellStatus::failed && c.gpu_out_of_memory;
  });
}

void SuiteSchedule::on_run_done(std::size_t index) {
  Slot& slot = slots_[index];
  Job& job = slot.entry.job;
  if (const auto peak = slot.run->result().peak_rss)
    job.estimate = std::max(job.estimate.value_or(0), *peak);
  if (const auto peak = slot.run->result().peak_gpu)
    job.gpu_estimate = std::max(job.gpu_estimate.value_or(0), *peak);
  const bool of_ours = !slot.stopping && oom_kill_of_ours(slot);
  const bool gpu_of_ours = !slot.stopping && !of_ours && gpu_oom_of_ours(slot);
  if (slot.stopping || of_ours || gpu_of_ours) {
    if (of_ours || gpu_of_ours) {
      std::string why = of_ours ? "OOM-killed while other notebooks ran beside it (smoke's "
                                  "packing, not the notebook's fault)"
                                : "its framework could not get GPU memory while other notebooks "
                                  "held the same GPU (smoke's packing, not the notebook's fault)";
      say(fmt::format("{}: {}; it runs again alone", job.name, why));
      slot.requeues.push_back(std::move(why));
      (of_ours ? slot.oom_ran_again : slot.gpu_oom_ran_again) = true;
    }
    slot.stopping = false;
    job.alone = true;
    retired_.push_back(std::move(slot.run));
    slot.queued_ns = util::steady_ns();
    admission_.enqueue(job);
    start_more();
    return;
  }
  NotebookResult result = slot.run->result();
  if (admission_.budget()) {
    Scheduling scheduling;
    scheduling.estimate = slot.admitted_estimate;
    scheduling.wait_s = slot.waited_s;
    scheduling.requeues = slot.requeues;
    if (slot.gpu) scheduling.gpu = admission_.gpus()[*slot.gpu].uuid;
    result.scheduling = std::move(scheduling);
    if (!slot.packed && oom_killed(result))
      result.warnings.push_back(
          "OOM-killed while it ran alone: the notebook's own, not smoke's packing");
  }
  slot.result = std::move(result);
  while (told_ < slots_.size() && slots_[told_].result)
    on_result_(*slots_[told_++].result);
  if (told_ == slots_.size())
    on_all_done_();
  else
    start_more();
}

std::vector<NotebookResult> SuiteSchedule::results() const {
  std::vector<NotebookResult> out;
  for (const auto& slot : slots_) {
    if (slot.result) {
      out.push_back(*slot.result);
      continue;
    }
    NotebookResult never;
    never.path = slot.entry.notebook.path;
    never.kernel_name = slot.entry.spec.name;
    out.push_back(std::move(never));
  }
  return out;
}

}  // namespace kwd::smoke
