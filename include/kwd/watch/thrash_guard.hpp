#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>

#include "kwd/timeline/memory_sample.hpp"

namespace kwd::watch {

// What the guard had seen when it gave up on the kernel.
struct Thrashing {
  std::int64_t since_ms = 0;  // wall clock: the first sample of the spell
  std::int64_t at_ms = 0;     // the sample that ended it
  std::int64_t limit = 0;
  std::int64_t usage = 0;
  std::int64_t most_file_cache = 0;  // the most page cache left to it during the spell
  std::int64_t refaults = 0;         // pages read back over the last `spell` of it
  double refaults_per_second = 0;
};

// A kernel that fills its memory limit with memory it cannot give back (tensors, arrays: no
// swap to put them in) leaves reclaim only its page cache, and the code it runs is in that
// cache: TensorFlow's gigabyte of libraries. Reclaim evicts the code, the next instruction
// reads it back from disk, and since reclaim always frees something the OOM killer never
// fires: the kernel sits at its limit for minutes, a cell that shows [*] and a machine whose
// disk is busy (seen: 667 s at a 1536M limit, 275 pages read back a second). The guard
// watches for that spell in the cgroup the watchdog made: usage at the limit, the page cache
// squeezed under a tenth of it, and pages read back at least kMinRefaultsPerSecond, for
// `spell` without a break. A kernel that is merely full and quiet, or that streams a file
// through a large cache, is never in one.
class ThrashGuard {
 public:
  explicit ThrashGuard(std::chrono::milliseconds spell) : spell_ms_(spell.count()) {}

  // Each memory sample, in order; the spell's facts once (then nothing more).
  std::optional<Thrashing> observe(const timeline::MemorySample& sample);

  static constexpr double kMinRefaultsPerSecond = 50;
  // The counter is read once a second; this long without a refault ends a spell.
  static constexpr std::int64_t kQuietMs = 5000;

 private:
  void end_spell();

  struct Point {
    std::int64_t t_ms;
    std::int64_t refaults;
  };
  std::int64_t spell_ms_;
  std::deque<Point> points_;  // the spell's samples, from one at least `spell` old
  std::int64_t since_ms_ = -1;
  std::int64_t most_file_cache_ = 0;
  std::int64_t last_refaults_ = timeline::kUnknown;
  std::int64_t last_rise_ms_ = 0;
  bool fired_ = false;
};

}  // namespace kwd::watch
