#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <vector>

#include "kwd/timeline/memory_sample.hpp"

namespace kwd::timeline {

// Fixed memory whatever the session length: the last `recent_capacity` samples at full
// rate, and before them one sample per `coarse_period_ms` (the per-field maximum of the
// samples it stands for, so no peak is ever lost) for the last `coarse_capacity` periods.
class Timeline {
 public:
  Timeline(std::size_t recent_capacity, std::int64_t coarse_period_ms, std::size_t coarse_capacity);

  void add(const MemorySample& sample);

  // Oldest first: coarse samples older than the recent window, then the recent ones.
  [[nodiscard]] std::vector<MemorySample> recent() const;
  [[nodiscard]] std::vector<MemorySample> coarse() const;
  [[nodiscard]] const MemorySample* latest() const;
  [[nodiscard]] std::size_t size() const { return recent_count_; }
  // Peak of every field over the whole session (not only what is retained).
  [[nodiscard]] const MemorySample& peak() const { return peak_; }

 private:
  static void fold_max(MemorySample& into, const MemorySample& s);

  std::size_t recent_capacity_;
  std::size_t coarse_capacity_;
  std::vector<MemorySample> recent_;
  std::size_t recent_head_ = 0;
  std::size_t recent_count_ = 0;

  std::vector<MemorySample> coarse_;
  std::size_t coarse_head_ = 0;
  std::size_t coarse_count_ = 0;
  std::int64_t coarse_period_ms_;
  MemorySample coarse_pending_{};
  bool have_pending_ = false;

  MemorySample peak_{};
};

// Column-oriented JSON: {"t_ms": [...], "rss": [...], ...}; series nobody measured are left
// out, and unknown points are null.
nlohmann::json samples_to_json(const std::vector<MemorySample>& samples);

}  // namespace kwd::timeline
