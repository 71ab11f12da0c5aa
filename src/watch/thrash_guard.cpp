#include "kwd/watch/thrash_guard.hpp"

#include <algorithm>

namespace kwd::watch {
namespace {

// Within 1 % (at least a MiB) of the limit: reclaim keeps the usage a little under it.
bool at_the_limit(std::int64_t usage, std::int64_t limit) {
  return usage >= limit - std::max<std::int64_t>(limit / 100, std::int64_t{1} << 20);
}

}  // namespace

std::optional<Thrashing> ThrashGuard::observe(const timeline::MemorySample& s,
                                              std::int64_t steady_ms) {
  using timeline::kUnknown;
  if (fired_) return std::nullopt;
  const bool squeezed = s.cgroup_limit > 0 && s.cgroup_usage != kUnknown &&
                        s.cgroup_file_cache != kUnknown && s.cgroup_refaults != kUnknown &&
                        at_the_limit(s.cgroup_usage, s.cgroup_limit) &&
                        s.cgroup_file_cache <= std::min(kMaxSqueezedCache, s.cgroup_limit / 10);
  if (!squeezed) {
    end_spell();
    last_refaults_ = kUnknown;
    return std::nullopt;
  }
  if (s.cgroup_refaults != last_refaults_) {
    last_refaults_ = s.cgroup_refaults;
    last_rise_ms_ = steady_ms;
  }
  // Squeezed and quiet (nothing read back for a while) is no thrash: a spell is unbroken.
  if (steady_ms - last_rise_ms_ > kQuietMs) {
    end_spell();
    return std::nullopt;
  }
  if (since_steady_ms_ < 0) {
    since_steady_ms_ = steady_ms;
    since_wall_ms_ = s.t_ms;
  }
  most_file_cache_ = std::max(most_file_cache_, s.cgroup_file_cache);
  points_.push_back({steady_ms, s.cgroup_refaults});
  // The rate is judged over the last `spell` only.
  while (points_.size() > 2 && steady_ms - points_[1].steady_ms >= spell_ms_)
    points_.pop_front();
  const Point& first = points_.front();
  const std::int64_t span_ms = steady_ms - first.steady_ms;
  if (span_ms < spell_ms_ || span_ms <= 0) return std::nullopt;
  // A counter that went back (a reader that reopened) says nothing about the spell.
  const std::int64_t refaults = std::max<std::int64_t>(0, s.cgroup_refaults - first.refaults);
  const double per_second = static_cast<double>(refaults) * 1000.0 / static_cast<double>(span_ms);
  if (per_second < kMinRefaultsPerSecond) return std::nullopt;
  fired_ = true;
  Thrashing spell;
  spell.since_ms = since_wall_ms_;
  spell.at_ms = s.t_ms;
  spell.seconds = static_cast<double>(steady_ms - since_steady_ms_) / 1000.0;
  spell.limit = s.cgroup_limit;
  spell.usage = s.cgroup_usage;
  spell.most_file_cache = most_file_cache_;
  spell.refaults = refaults;
  spell.refaults_per_second = per_second;
  return spell;
}

void ThrashGuard::end_spell() {
  points_.clear();
  since_wall_ms_ = -1;
  since_steady_ms_ = -1;
  most_file_cache_ = 0;
}

}  // namespace kwd::watch
