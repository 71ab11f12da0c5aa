#include "kwd/watch/thrash_guard.hpp"

#include <algorithm>

namespace kwd::watch {
namespace {

// Within 1 % (at least a MiB) of the limit: reclaim keeps the usage a little under it.
bool at_the_limit(std::int64_t usage, std::int64_t limit) {
  return usage >= limit - std::max<std::int64_t>(limit / 100, std::int64_t{1} << 20);
}

}  // namespace

std::optional<Thrashing> ThrashGuard::observe(const timeline::MemorySample& s) {
  using timeline::kUnknown;
  if (fired_) return std::nullopt;
  const bool squeezed = s.cgroup_limit > 0 && s.cgroup_usage != kUnknown &&
                        s.cgroup_file_cache != kUnknown && s.cgroup_refaults != kUnknown &&
                        at_the_limit(s.cgroup_usage, s.cgroup_limit) &&
                        s.cgroup_file_cache <= s.cgroup_limit / 10;
  if (!squeezed) {
    end_spell();
    last_refaults_ = kUnknown;
    return std::nullopt;
  }
  if (s.cgroup_refaults != last_refaults_) {
    last_refaults_ = s.cgroup_refaults;
    last_rise_ms_ = s.t_ms;
  }
  // Full and quiet (nothing read back for a while) is no thrash: a spell is unbroken.
  if (s.t_ms - last_rise_ms_ > kQuietMs) {
    end_spell();
    return std::nullopt;
  }
  if (since_ms_ < 0) since_ms_ = s.t_ms;
  most_file_cache_ = std::max(most_file_cache_, s.cgroup_file_cache);
  points_.push_back({s.t_ms, s.cgroup_refaults});
  // The rate is judged over the last `spell` only.
  while (points_.size() > 2 && s.t_ms - points_[1].t_ms >= spell_ms_)
    points_.pop_front();
  const Point& first = points_.front();
  const std::int64_t span_ms = s.t_ms - first.t_ms;
  if (span_ms < spell_ms_ || span_ms <= 0) return std::nullopt;
  // A counter that went back (a reader that reopened) says nothing about the spell.
  const std::int64_t refaults = std::max<std::int64_t>(0, s.cgroup_refaults - first.refaults);
  const double per_second = static_cast<double>(refaults) * 1000.0 / static_cast<double>(span_ms);
  if (per_second < kMinRefaultsPerSecond) return std::nullopt;
  fired_ = true;
  return Thrashing{since_ms_,        s.t_ms,   s.cgroup_limit, s.cgroup_usage,
                   most_file_cache_, refaults, per_second};
}

void ThrashGuard::end_spell() {
  points_.clear();
  since_ms_ = -1;
  most_file_cache_ = 0;
}

}  // namespace kwd::watch
