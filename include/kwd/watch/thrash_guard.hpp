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
  std::int64_t at_ms = 0;     // wall clock: the sample that ended it
  double seconds = 0;         // the spell's length, by the steady clock
  std::int64_t limit = 0;
  std::int64_t usage = 0;
  std::int64_t most_file_cache = 0;  // the most page cache left to it during the spell
  std::int64_t refaults = 0;         // pages read back over the last `spell` of it
  double refaults_per_second = 0;
};

// A kernel that keeps asking for memory it cannot give back (tensors, arrays: no swap to put
// them in) at its limit leaves reclaim only its page cache, and the code it runs is in that
// cache: TensorFlow's gigabyte of libraries. Reclaim evicts the code, the next instruction
// reads it back from disk, and while reclaim frees something the OOM killer does not fire:
// the kernel crawls at its limit for minutes, a cell at [*] and a busy disk (seen: 667 s at
// a 1536M limit, 1.7 MiB of page cache left, 275 pages read back a second).
//
// The guard watches the cgroup the watchdog made for that spell: usage at the limit, the
// page cache squeezed to almost nothing (kMaxSqueezedCache, or a tenth of a small limit)
// and pages read back at least kMinRefaultsPerSecond, for `spell` without a break. A kernel
// full and quiet is never in one, nor one that streams or re-reads data through the room it
// left itself (tens of MiB of cache, its code safe in it), however busy its disk: only one
// whose demand has squeezed out its own code.
class ThrashGuard {
 public:
  explicit ThrashGuard(std::chrono::milliseconds spell) : spell_ms_(spell.count()) {}

  // Each memory sample, in order, with the steady clock's time of it (the spell is timed by
  // that: a step of the wall clock neither ends nor fakes one). The spell's facts once (then
  // nothing more).
  std::optional<Thrashing> observe(const timeline::MemorySample& sample, std::int64_t steady_ms);

  static constexpr std::int64_t kMaxSqueezedCache = std::int64_t{16} << 20;
  static constexpr double kMinRefaultsPerSecond = 20;
  // The counter is read once a second; this long without a refault ends a spell.
  static constexpr std::int64_t kQuietMs = 5000;

 private:
  void end_spell();

  struct Point {
    std::int64_t steady_ms;
    std::int64_t refaults;
  };
  std::int64_t spell_ms_;
  std::deque<Point> points_;  // the spell's samples, from one at least `spell` old
  std::int64_t since_wall_ms_ = -1;
  std::int64_t since_steady_ms_ = -1;
  std::int64_t most_file_cache_ = 0;
  std::int64_t last_refaults_ = timeline::kUnknown;
  std::int64_t last_rise_ms_ = 0;
  bool fired_ = false;
};

}  // namespace kwd::watch
