#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace kwd::timeline {

// Steps of the wall clock while a kernel is watched (an administrator's `date -s`, an NTP
// step, a virtual machine resumed): between two looks the wall clock moved more than a second
// away from what the monotonic clock says passed. A report's times are wall-clock times; on
// either side of a step they differ by the step, so the report names each one.
class ClockSteps {
 public:
  struct Step {
    std::int64_t at_ms = 0;  // the wall clock just after it
    std::int64_t by_ms = 0;  // forward (> 0) or back (< 0)
  };
  static constexpr std::int64_t kToleranceMs = 1000;
  static constexpr std::size_t kKept = 16;  // the first ones; the count goes on

  // Both clocks, read together. Returns the step this look found, if any.
  std::optional<Step> look(std::int64_t wall_ms, std::int64_t steady_ms);
  [[nodiscard]] const std::vector<Step>& steps() const { return steps_; }
  [[nodiscard]] std::int64_t count() const { return count_; }

 private:
  std::optional<std::int64_t> last_wall_ms_;
  std::int64_t last_steady_ms_ = 0;
  std::vector<Step> steps_;
  std::int64_t count_ = 0;
};

}  // namespace kwd::timeline
