#include "kwd/timeline/timeline.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace kwd::timeline {

namespace {

// Rings fill as samples come rather than being made whole at once: a daemon that finds
// hundreds of kernels together pages in no empty history for them, and one watched for a
// minute holds a minute of it.
void put(std::vector<MemorySample>& ring, std::size_t capacity, std::size_t head,
         const MemorySample& sample) {
  if (head < ring.size()) {
    ring[head] = sample;
    return;
  }
  if (ring.size() == ring.capacity())
    ring.reserve(std::min(capacity, std::max<std::size_t>(16, 2 * ring.size())));
  ring.push_back(sample);
}

}  // namespace

Timeline::Timeline(std::size_t recent_capacity, std::int64_t coarse_period_ms,
                   std::size_t coarse_capacity)
    : recent_capacity_(std::max<std::size_t>(recent_capacity, 1)),
      coarse_capacity_(std::max<std::size_t>(coarse_capacity, 1)),
      coarse_period_ms_(std::max<std::int64_t>(coarse_period_ms, 1)) {}

void Timeline::fold_max(MemorySample& into, const MemorySample& s) {
  for (const auto& f : kSeriesFields)
    into.*f.member = std::max(into.*f.member, s.*f.member);
}

void Timeline::add(const MemorySample& sample) {
  if (recent_count_ == recent_capacity_) {
    // The oldest full-rate sample leaves the recent window and folds into the coarse tier.
    const MemorySample& leaving = recent_[recent_head_];
    const std::int64_t bucket = leaving.t_ms - leaving.t_ms % coarse_period_ms_;
    if (have_pending_ && coarse_pending_.t_ms != bucket) {
      put(coarse_, coarse_capacity_, coarse_head_, coarse_pending_);
      coarse_head_ = (coarse_head_ + 1) % coarse_capacity_;
      coarse_count_ = std::min(coarse_count_ + 1, coarse_capacity_);
      have_pending_ = false;
    }
    if (!have_pending_) {
      coarse_pending_ = leaving;
      coarse_pending_.t_ms = bucket;
      have_pending_ = true;
    } else {
      fold_max(coarse_pending_, leaving);
    }
  }
  put(recent_, recent_capacity_, recent_head_, sample);
  recent_head_ = (recent_head_ + 1) % recent_capacity_;
  recent_count_ = std::min(recent_count_ + 1, recent_capacity_);
  fold_max(peak_, sample);
  peak_.t_ms = std::max(peak_.t_ms, sample.t_ms);
}

std::vector<MemorySample> Timeline::recent() const {
  std::vector<MemorySample> out;
  out.reserve(recent_count_);
  const std::size_t cap = recent_capacity_;
  const std::size_t start = (recent_head_ + cap - recent_count_) % cap;
  for (std::size_t i = 0; i < recent_count_; ++i)
    out.push_back(recent_[(start + i) % cap]);
  return out;
}

std::vector<MemorySample> Timeline::coarse() const {
  std::vector<MemorySample> out;
  out.reserve(coarse_count_ + 1);
  const std::size_t cap = coarse_capacity_;
  const std::size_t start = (coarse_head_ + cap - coarse_count_) % cap;
  for (std::size_t i = 0; i < coarse_count_; ++i)
    out.push_back(coarse_[(start + i) % cap]);
  if (have_pending_) out.push_back(coarse_pending_);
  return out;
}

const MemorySample* Timeline::latest() const {
  if (recent_count_ == 0) return nullptr;
  return &recent_[(recent_head_ + recent_capacity_ - 1) % recent_capacity_];
}

nlohmann::json samples_to_json(const std::vector<MemorySample>& samples) {
  nlohmann::json out = nlohmann::json::object();
  auto& times = out["t_ms"] = nlohmann::json::array();
  for (const auto& s : samples)
    times.push_back(s.t_ms);
  for (const auto& f : kSeriesFields) {
    const bool measured = std::any_of(samples.begin(), samples.end(),
                                      [&](const MemorySample& s) { return s.*f.member >= 0; });
    if (!measured) continue;
    auto& column = out[std::string(f.name)] = nlohmann::json::array();
    for (const auto& s : samples) {
      if (s.*f.member >= 0)
        column.push_back(s.*f.member);
      else
        column.push_back(nullptr);
    }
  }
  return out;
}

}  // namespace kwd::timeline
