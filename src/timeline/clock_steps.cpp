#include "kwd/timeline/clock_steps.hpp"

#include <cstdlib>

namespace kwd::timeline {

std::optional<ClockSteps::Step> ClockSteps::look(std::int64_t wall_ms, std::int64_t steady_ms) {
  std::optional<Step> found;
  if (last_wall_ms_) {
    const std::int64_t expected = *last_wall_ms_ + (steady_ms - last_steady_ms_);
    if (std::llabs(wall_ms - expected) > kToleranceMs) {
      found = Step{wall_ms, wall_ms - expected};
      ++count_;
      if (steps_.size() < kKept) steps_.push_back(*found);
    }
  }
  last_wall_ms_ = wall_ms;
  last_steady_ms_ = steady_ms;
  return found;
}

}  // namespace kwd::timeline
