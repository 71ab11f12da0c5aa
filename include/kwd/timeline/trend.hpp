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

// A kernel's start-up (its imports: tens of MiB in a second, then flat) is no rate toward a
// limit; the samples a live rate may be drawn from begin when it is over: at the kernel's
// first status other than "starting" (`ready_at_ms`), and at the latest this long after the
// kernel started (it may say nothing, or say it long after: a late IOPub connection).
inline constexpr std::int64_t kStartupAtMostMs = 30'000;
// `recent` without the samples of the kernel's start-up (started at `kernel_started_at_ms`);
// only the newest while the start-up lasts (its memory and limits, no rate). All of them when
// the clock has stepped back far behind those times.
std::vector<MemorySample> after_startup(std::vector<MemorySample> recent,
                                        std::optional<std::int64_t> ready_at_ms,
                                        std::int64_t kernel_started_at_ms);

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
