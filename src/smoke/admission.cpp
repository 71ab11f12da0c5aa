#include "kwd/smoke/admission.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>

#include "kwd/util/size_parse.hpp"

namespace kwd::smoke {
namespace {

constexpr std::int64_t kMiB = 1024 * 1024;

// A notebook is over its estimate past this much: a kernel's memory moves a little from
// run to run (the allocator, the order threads start in).
std::int64_t growth_slack(std::int64_t estimate) {
  return std::max<std::int64_t>(estimate / 20, 32 * kMiB);
}

std::string names_of(const std::vector<RunningJob>& running) {
  std::string out;
  for (const auto& r : running)
    out += (out.empty() ? "" : ", ") + r.job.name;
  return out;
}

std::int64_t expected_end_ns(const RunningJob& r) {
  return r.started_ns + static_cast<std::int64_t>(r.job.seconds * 1e9);
}

}  // namespace

Admission::Admission(std::optional<std::int64_t> budget, std::size_t ceiling,
                     std::vector<SmokeGpu> gpus)
    : budget_(budget), ceiling_(std::max<std::size_t>(ceiling, 1)), gpus_(std::move(gpus)) {}

std::int64_t Admission::reserved(const RunningJob& r) {
  return std::max({r.job.estimate.value_or(0), r.peak, r.used});
}

void Admission::enqueue(Job job) {
  if (!budget_) {
    // A plain -j N: the order given.
    const auto at = std::find_if(queue_.begin(), queue_.end(),
                                 [&](const Job& q) { return q.index > job.index; });
    queue_.insert(at, std::move(job));
    return;
  }
  if (job.estimate && *job.estimate > *budget_) job.alone = true;
  // Who runs alone first (it holds everyone back until it has run), then those never seen
  // (their memory is learnt early), then the longest, the largest first among equals: the
  // long and heavy ones back to back, the light ones in the gaps beside them.
  const auto rank = [](const Job& j) { return j.alone ? 0 : !j.estimate ? 1 : 2; };
  const auto before = [&](const Job& a, const Job& b) {
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    if (rank(a) == 2) {
      if (a.seconds != b.seconds) return a.seconds > b.seconds;
      if (*a.estimate != *b.estimate) return *a.estimate > *b.estimate;
    }
    return a.index < b.index;
  };
  queue_.insert(std::upper_bound(queue_.begin(), queue_.end(), job, before), std::move(job));
}

bool Admission::holding_for_growth(const std::vector<RunningJob>& running, std::string& why) const {
  for (const auto& r : running)
    if (r.job.estimate && r.used > *r.job.estimate + growth_slack(*r.job.estimate)) {
      why = fmt::format("{} holds {}, past its estimate of {}", r.job.name,
                        util::format_bytes(r.used), util::format_bytes(*r.job.estimate));
      return true;
    }
  return false;
}

Admission::Decision Admission::next(const std::vector<RunningJob>& running, std::int64_t now_ns) {
  Decision decision;
  if (queue_.empty() || running.size() >= ceiling_) return decision;
  // What each GPU holds for the notebooks placed on it, and how many run there.
  std::vector<std::int64_t> gpu_held(gpus_.size(), 0);
  std::vector<std::size_t> gpu_placed(gpus_.size(), 0);
  for (const auto& r : running)
    if (r.gpu && *r.gpu < gpu_held.size()) {
      gpu_held[*r.gpu] += std::max(r.job.gpu_estimate.value_or(0), r.gpu_peak);
      ++gpu_placed[*r.gpu];
    }
  // Where a job would go: nullopt when some GPU must take it and none can.
  const auto gpu_for = [&](const Job& job) -> std::optional<std::optional<std::size_t>> {
    if (gpus_.empty()) return std::optional<std::size_t>();
    const auto gpu = place_on_gpu(gpus_, gpu_held, job.gpu_estimate, gpu_placed);
    if (!gpu) return std::nullopt;
    return gpu;
  };
  // A resource spec's slots are a hard limit, as under CTest: nothing starts without one.
  const bool by_slots = !gpus_.empty() && gpus_.front().slots > 0;
  if (by_slots && !gpu_for(queue_.front())) {
    decision.waits =
        fmt::format("{} waits: every GPU slot of the resource spec is taken", queue_.front().name);
    return decision;
  }
  const auto take = [&](std::size_t i) {
    // One bigger than every GPU's room starts alone, on the GPU with the most free.
    if (const auto gpu = gpu_for(queue_[i]))
      decision.gpu = *gpu;
    else
      decision.gpu = place_on_gpu(gpus_, gpu_held, std::nullopt, gpu_placed);
    decision.start = std::move(queue_[i]);
    queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
    decision.waits.clear();
    return decision;
  };
  if (!budget_) return take(0);
  const Job& head = queue_.front();
  if (running.empty()) return take(0);
  for (const auto& r : running)
    if (r.job.alone) {
      decision.waits = fmt::format("{} waits: {} runs alone", head.name, r.job.name);
      return decision;
    }
  if (std::string why; holding_for_growth(running, why)) {
    decision.waits = fmt::format("{} waits: {}", head.name, why);
    return decision;
  }
  if (head.alone) {
    decision.waits =
        fmt::format("{} waits to run alone (running {})", head.name, names_of(running));
    return decision;
  }

  std::int64_t held = 0;
  std::optional<std::int64_t> youngest_unknown_ns;
  for (const auto& r : running) {
    held += reserved(r);
    if (!r.job.estimate)
      youngest_unknown_ns = std::max(youngest_unknown_ns.value_or(r.started_ns), r.started_ns);
  }
  const std::int64_t free = *budget_ - held;
  const bool unknown_settling =
      youngest_unknown_ns && now_ns - *youngest_unknown_ns < kUnknownSettleNs;

  // The head's start, if it cannot start now: when enough of the running ones will have
  // ended (by their recorded times) to make room for it, and the room left beside it then.
  // A notebook behind it may start in the gap only if it leaves that start untouched: it
  // ends first, or it fits in the room left beside the head (EASY backfilling).
  std::optional<std::int64_t> shadow_ns;
  std::int64_t room_beside_head = 0;
  for (std::size_t i = 0; i < queue_.size(); ++i) {
    const Job& job = queue_[i];
    if (job.alone) continue;
    if (!job.estimate) {
      // Room for a kernel to start in at least; what it grows to is watched (over_budget).
      if (!unknown_settling && free >= std::min(*budget_ / 10, 256 * kMiB) && gpu_for(job))
        return take(i);
      if (i == 0)
        decision.waits =
            unknown_settling
                ? fmt::format(
                      "{} waits: its memory is unknown, and another of unknown memory "
                      "started a moment ago (running {})",
                      job.name, names_of(running))
                : fmt::format("{} waits: its memory is unknown, and {} are free (running {})",
                              job.name, util::format_bytes(std::max<std::int64_t>(free, 0)),
                              names_of(running));
      continue;
    }
    if (!gpu_for(job)) {
      if (i == 0) {
        std::int64_t most = 0;
        for (std::size_t g = 0; g < gpus_.size(); ++g)
          most = std::max(most, gpus_[g].budget - gpu_held[g]);
        decision.waits =
            fmt::format("{} waits: needs {} of GPU memory, {} free on the emptiest GPU", job.name,
                        util::format_bytes(job.gpu_estimate.value_or(0)),
                        util::format_bytes(std::max<std::int64_t>(most, 0)));
      }
      continue;
    }
    const bool fits = *job.estimate <= free;
    if (i == 0 && !fits) {
      decision.waits = fmt::format(
          "{} waits: needs {}, {} free (running {})", job.name, util::format_bytes(*job.estimate),
          util::format_bytes(std::max<std::int64_t>(free, 0)), names_of(running));
      std::vector<const RunningJob*> by_end;
      for (const auto& r : running)
        by_end.push_back(&r);
      std::sort(by_end.begin(), by_end.end(), [](const RunningJob* a, const RunningJob* b) {
        return expected_end_ns(*a) < expected_end_ns(*b);
      });
      std::int64_t freed = free;
      for (const auto* r : by_end) {
        freed += reserved(*r);
        if (freed >= *job.estimate) {
          shadow_ns = expected_end_ns(*r);
          room_beside_head = freed - *job.estimate;
          break;
        }
      }
      continue;
    }
    if (!fits) continue;
    if (i == 0 || !shadow_ns) return take(i);
    const bool ends_first =
        shadow_ns && now_ns + static_cast<std::int64_t>(job.seconds * 1e9) <= *shadow_ns;
    if (ends_first || *job.estimate <= room_beside_head) return take(i);
  }
  return decision;
}

std::optional<std::size_t> Admission::over_budget(const std::vector<RunningJob>& running) const {
  if (!budget_ || running.size() < 2) return std::nullopt;
  std::int64_t used = 0;
  for (const auto& r : running)
    used += r.used;
  if (used < *budget_) return std::nullopt;
  // One past its recorded peak misled the packing: it goes. Else the youngest, which loses
  // the least work (one never seen is not "over" anything: it may be the heaviest, or the
  // one that only started).
  const RunningJob* chosen = nullptr;
  std::int64_t most_over = 0;
  for (const auto& r : running) {
    if (r.job.alone || !r.job.estimate) continue;
    const std::int64_t over = r.used - *r.job.estimate - growth_slack(*r.job.estimate);
    if (over > most_over) {
      most_over = over;
      chosen = &r;
    }
  }
  if (chosen == nullptr)
    for (const auto& r : running)
      if (!r.job.alone && (chosen == nullptr || r.started_ns > chosen->started_ns)) chosen = &r;
  if (chosen == nullptr) return std::nullopt;
  return chosen->job.index;
}

Prediction predict(const std::vector<Job>& jobs, std::optional<std::int64_t> budget,
                   std::size_t ceiling, const std::vector<SmokeGpu>& gpus) {
  Prediction out;
  if (jobs.empty()) return out;
  std::int64_t known_sum = 0;
  std::size_t known = 0;
  for (const auto& j : jobs)
    if (j.estimate) {
      known_sum += *j.estimate;
      ++known;
    }
  const std::int64_t mean = known == 0 ? 0 : known_sum / static_cast<std::int64_t>(known);
  Admission admission(budget, ceiling, gpus);
  double seconds_sum = 0, memory_seconds = 0, over_half_seconds = 0, gpu_memory_seconds = 0;
  for (Job j : jobs) {
    if (!j.estimate) j.estimate = mean;
    seconds_sum += j.seconds;
    gpu_memory_seconds += j.seconds * static_cast<double>(j.gpu_estimate.value_or(0));
    // No two notebooks that each hold more than half the budget run at once.
    if (budget && *j.estimate * 2 > *budget) over_half_seconds += j.seconds;
    memory_seconds += j.seconds * static_cast<double>(*j.estimate);
    out.lower_bound = std::max(out.lower_bound, j.seconds);
    admission.enqueue(std::move(j));
  }
  out.lower_bound =
      std::max({out.lower_bound, seconds_sum / static_cast<double>(ceiling), over_half_seconds});
  if (budget && *budget > 0)
    out.lower_bound = std::max(out.lower_bound, memory_seconds / static_cast<double>(*budget));
  std::int64_t gpu_room = 0;
  for (const auto& g : gpus)
    gpu_room += g.budget;
  if (gpu_room > 0)
    out.lower_bound = std::max(out.lower_bound, gpu_memory_seconds / static_cast<double>(gpu_room));

  std::vector<RunningJob> running;
  std::int64_t now = 0;
  for (;;) {
    for (;;) {
      auto decision = admission.next(running, now);
      if (!decision.start) break;
      RunningJob r;
      r.job = std::move(*decision.start);
      r.used = r.peak = *r.job.estimate;
      r.gpu = decision.gpu;
      r.gpu_peak = r.job.gpu_estimate.value_or(0);
      r.started_ns = now;
      running.push_back(std::move(r));
    }
    if (running.empty()) break;  // nothing runs and nothing can start: the queue is empty
    const auto first = std::min_element(running.begin(), running.end(),
                                        [](const RunningJob& a, const RunningJob& b) {
                                          return expected_end_ns(a) < expected_end_ns(b);
                                        });
    now = expected_end_ns(*first);
    std::erase_if(running, [&](const RunningJob& r) { return expected_end_ns(r) <= now; });
  }
  out.seconds = static_cast<double>(now) / 1e9;
  return out;
}

}  // namespace kwd::smoke
