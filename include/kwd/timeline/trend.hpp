#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kwd/timeline/timeline.hpp"

namespace kwd::timeline {

inline constexpr std::int64_t kShortWindowMs = 10'000;
inline constexpr std::int64_t kLongWindowMs = 60'000;

// Least-squares slope, in units per second, of one series over the samples of the last
// `window_ms` before the newest sample. Unknown points are skipped; nullopt with fewer
// than three known points or when they span less than a second.
std::optional<double> least_squares_slope(const std::vector<MemorySample>& samples,
                                          std::int64_t MemorySample::*field,
                                          std::int64_t window_ms);

struct SeriesTrend {
  std::optional<double> slope_10s;
  std::optional<double> slope_60s;
  std::int64_t peak = kUnknown;  // over the whole session
};
// Every measured series but the ceilings themselves (cgroup_limit, gpu_total).
std::map<std::string, SeriesTrend> compute_trends(const Timeline& timeline);

// A ceiling in force and how fast the kernel is heading for it.
struct Limit {
  std::string name;  // "cgroup", "mem_total", "gpu_total"
  std::int64_t bytes = 0;
  std::int64_t used = 0;                  // what counts against it at the newest sample
  std::string series;                     // the series whose growth approaches it
  std::optional<double> slope;            // bytes per second over the last 10 s
  std::optional<double> time_to_limit_s;  // (bytes - used) / slope, when growing
};
struct Limits {
  std::vector<Limit> all;
  // The limit reached first at the current rates; when nothing grows, the one with the
  // least headroom relative to its size.
  std::optional<std::size_t> tightest;
};
// cgroup: the cgroup's limit against its usage (the tree's RSS when usage is unknown);
// mem_total: MemTotal against MemTotal - MemAvailable; gpu_total: all devices' memory
// against all devices' use. Computed from the newest sample and the last 10 s.
Limits compute_limits(const std::vector<MemorySample>& recent);

// A limit's name as a reader says it, without an article: "machine's memory" for mem_total.
std::string limit_in_words(std::string_view name);

// docs/CONTRACT.md: memory.trend and memory.limits.
nlohmann::json trends_to_json(const std::map<std::string, SeriesTrend>& trends);
nlohmann::json limits_to_json(const Limits& limits);

}  // namespace kwd::timeline
