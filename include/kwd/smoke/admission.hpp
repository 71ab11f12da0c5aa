#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kwd/smoke/gpu_placement.hpp"

namespace kwd::smoke {

// `smoke -j auto`: which notebook starts next, so that the kernels running at once fit in the
// memory smoke runs in (the budget), by what each notebook held at its highest before.
// Pure: the runner feeds it what it measures, and it holds no clock of its own.

struct Job {
  std::size_t index = 0;                     // in the run's plan
  std::string name;                          // in the lines it explains itself with
  std::optional<std::int64_t> estimate;      // bytes at its highest; nullopt: never seen
  std::optional<std::int64_t> gpu_estimate;  // bytes of GPU memory at its highest
  double seconds = 0;                        // how long it took last time (else a guess)
  bool alone = false;                        // nothing runs beside it
};

struct RunningJob {
  Job job;
  std::int64_t used = 0;           // bytes now: its kernel's process tree
  std::int64_t peak = 0;           // bytes at its highest in this run so far
  std::int64_t started_ns = 0;     // on the runner's steady clock
  std::optional<std::size_t> gpu;  // where it was placed, in the Admission's gpus
  std::int64_t gpu_peak = 0;       // bytes of GPU memory at its highest so far
};

class Admission {
 public:
  // `budget`: bytes the kernels may hold together; nullopt: memory is not looked at, and the
  // notebooks start in the order given, `ceiling` at a time (a plain -j N).
  // `gpus`: where kernels may be placed (empty: no placement); a notebook starts only where
  // its GPU memory fits too.
  Admission(std::optional<std::int64_t> budget, std::size_t ceiling,
            std::vector<SmokeGpu> gpus = {});

  // A notebook of a known peak larger than the whole budget is made to run alone.
  void enqueue(Job job);
  [[nodiscard]] bool empty() const { return queue_.empty(); }
  [[nodiscard]] const std::vector<Job>& queue() const { return queue_; }
  [[nodiscard]] std::optional<std::int64_t> budget() const { return budget_; }
  [[nodiscard]] const std::vector<SmokeGpu>& gpus() const { return gpus_; }

  struct Decision {
    std::optional<Job> start;        // taken off the queue
    std::optional<std::size_t> gpu;  // the GPU it is to have, when there are GPUs
    // When nothing can start: why the first in line waits, as a line for the user
    // ("light3 waits: needs 1.2 GiB, 0.4 GiB free (running heavy0, light1)"); empty when it
    // waits for a free slot of the ceiling only.
    std::string waits;
  };
  [[nodiscard]] Decision next(const std::vector<RunningJob>& running, std::int64_t now_ns);

  // The notebook to stop (its plan index) when the running ones together reach the budget:
  // the one most over its recorded peak, else the youngest. Never one that runs alone: what
  // it does is its own.
  [[nodiscard]] std::optional<std::size_t> over_budget(
      const std::vector<RunningJob>& running) const;

  // What a notebook is counted as holding while it runs: the most of its estimate, its peak
  // so far and what it holds now.
  [[nodiscard]] static std::int64_t reserved(const RunningJob& r);

  // A notebook of unknown peak waits this long after the last one started before it starts
  // beside it: its memory is seen growing before the next one is let in.
  static constexpr std::int64_t kUnknownSettleNs = 1'500'000'000;

 private:
  [[nodiscard]] bool holding_for_growth(const std::vector<RunningJob>& running,
                                        std::string& why) const;

  std::optional<std::int64_t> budget_;
  std::size_t ceiling_;
  std::vector<SmokeGpu> gpus_;
  std::vector<Job> queue_;
};

// Seconds the queued jobs would take under Admission's rules, each holding its estimate for
// its seconds (an unknown estimate counts as the mean of the known ones), and the lower bound
// no schedule can beat: the longest notebook; those that each hold more than half the budget,
// back to back; every notebook's memory-seconds packed perfectly into the budget; and the
// ceiling's share of the time; with GPUs, every notebook's GPU memory-seconds packed perfectly
// into all the GPUs' room, and each placed as admission places it.
struct Prediction {
  double seconds = 0;
  double lower_bound = 0;
};
Prediction predict(const std::vector<Job>& jobs, std::optional<std::int64_t> budget,
                   std::size_t ceiling, const std::vector<SmokeGpu>& gpus = {});

}  // namespace kwd::smoke
