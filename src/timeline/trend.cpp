#include "kwd/timeline/trend.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

namespace kwd::timeline {

std::optional<double> least_squares_slope(const std::vector<MemorySample>& samples,
                                          std::int64_t MemorySample::*field,
                                          std::int64_t window_ms) {
  if (samples.empty()) return std::nullopt;
  const std::int64_t newest = samples.back().t_ms;
  const std::int64_t from = newest - window_ms;
  // Times relative to the newest sample, in seconds, keep the sums well conditioned.
  double n = 0, sum_t = 0, sum_y = 0;
  std::int64_t first_t = newest;
  for (auto it = samples.rbegin(); it != samples.rend() && it->t_ms >= from; ++it) {
    if ((*it).*field < 0) continue;
    const double t = static_cast<double>(it->t_ms - newest) / 1000.0;
    n += 1;
    sum_t += t;
    sum_y += static_cast<double>((*it).*field);
    first_t = it->t_ms;
  }
  if (n < 3 || newest - first_t < 1000) return std::nullopt;
  const double mean_t = sum_t / n, mean_y = sum_y / n;
  double num = 0, den = 0;
  for (auto it = samples.rbegin(); it != samples.rend() && it->t_ms >= from; ++it) {
    if ((*it).*field < 0) continue;
    const double dt = static_cast<double>(it->t_ms - newest) / 1000.0 - mean_t;
    num += dt * (static_cast<double>((*it).*field) - mean_y);
    den += dt * dt;
  }
  if (den <= 0) return std::nullopt;
  return num / den;
}

std::map<std::string, SeriesTrend> compute_trends(const Timeline& timeline) {
  std::map<std::string, SeriesTrend> out;
  const auto recent = timeline.recent();
  for (const auto& f : kSeriesFields) {
    if (f.member == &MemorySample::cgroup_limit || f.member == &MemorySample::gpu_total) continue;
    const std::int64_t peak = timeline.peak().*f.member;
    if (peak < 0) continue;  // never measured
    SeriesTrend t;
    t.peak = peak;
    t.slope_10s = least_squares_slope(recent, f.member, kShortWindowMs);
    t.slope_60s = least_squares_slope(recent, f.member, kLongWindowMs);
    out.emplace(std::string(f.name), t);
  }
  return out;
}

namespace {

// The machine's memory is a limit the kernel approaches when at least this share of its fall
// is the kernel's own growth...
constexpr double kKernelShareOfMachineFall = 0.25;
// ... or, whoever drives the fall, when the machine runs out within this many seconds.
constexpr double kMachineSoonS = 30.0;

// The slope of "MemTotal - MemAvailable" is minus that of MemAvailable.
std::optional<double> negated(std::optional<double> v) {
  if (v) return -*v;
  return v;
}

}  // namespace

std::string limit_in_words(std::string_view name) {
  if (name == "cgroup") return "cgroup memory limit";
  if (name == "mem_total") return "machine's memory";
  if (name == "mem_available") return "memory available";
  if (name == "gpu_total") return "GPU memory";
  return std::string(name);
}

std::vector<MemorySample> after_startup(std::vector<MemorySample> recent,
                                        std::optional<std::int64_t> ready_at_ms,
                                        std::int64_t kernel_started_at_ms) {
  if (recent.empty()) return recent;
  const std::int64_t from =
      std::min(ready_at_ms.value_or(INT64_MAX), kernel_started_at_ms + kStartupAtMostMs);
  const std::int64_t newest = recent.back().t_ms;
  // The wall clock set back by more than a start-up lasts: the times no longer compare.
  constexpr std::int64_t kClockStepMs = 2 * kStartupAtMostMs;
  if (from - newest > kClockStepMs) return recent;
  if (from > newest) return {recent.back()};
  std::erase_if(recent, [&](const MemorySample& x) { return x.t_ms < from; });
  return recent;
}

Limits compute_limits(const std::vector<MemorySample>& recent) {
  Limits out;
  if (recent.empty()) return out;
  const MemorySample& last = recent.back();
  if (last.cgroup_limit > 0) {
    const bool usage_known = last.cgroup_usage >= 0;
    const auto field = usage_known ? &MemorySample::cgroup_usage : &MemorySample::rss;
    out.all.push_back({"cgroup", last.cgroup_limit, std::max<std::int64_t>(last.*field, 0),
                       usage_known ? "cgroup_usage" : "rss",
                       least_squares_slope(recent, field, kShortWindowMs), std::nullopt});
  }
  if (last.mem_total > 0 && last.mem_available >= 0) {
    // The machine's memory falls with every process on it; it counts as approaching while
    // the kernel's own growth is a fair share of that fall: a browser loading next door while
    // the kernel grows a little must not make it the tightest limit. Or, while the kernel
    // grows at all, when the machine runs out soon whoever drives it: five kernels growing
    // together each drive less than a quarter, and so does one whose children left its tree.
    const auto kernel_slope = least_squares_slope(recent, &MemorySample::rss, kShortWindowMs);
    const auto machine_fall =
        negated(least_squares_slope(recent, &MemorySample::mem_available, kShortWindowMs));
    const bool grows = kernel_slope && *kernel_slope > 0 && machine_fall && *machine_fall > 0;
    const bool approaching =
        grows && (*kernel_slope >= kKernelShareOfMachineFall * *machine_fall ||
                  static_cast<double>(last.mem_available) / *machine_fall < kMachineSoonS);
    out.all.push_back({"mem_total", last.mem_total, last.mem_total - last.mem_available,
                       "mem_available", approaching ? machine_fall : std::nullopt, std::nullopt});
  }
  if (last.gpu_total > 0 && last.gpu_device_used >= 0) {
    out.all.push_back({"gpu_total", last.gpu_total, last.gpu_device_used, "gpu_device_used",
                       least_squares_slope(recent, &MemorySample::gpu_device_used, kShortWindowMs),
                       std::nullopt});
  }
  for (auto& l : out.all) {
    if (l.slope && *l.slope > 0)
      l.time_to_limit_s = std::max<double>(0, static_cast<double>(l.bytes - l.used) / *l.slope);
  }
  for (std::size_t i = 0; i < out.all.size(); ++i) {
    if (!out.all[i].time_to_limit_s) continue;
    if (!out.tightest || !out.all[*out.tightest].time_to_limit_s ||
        *out.all[i].time_to_limit_s < *out.all[*out.tightest].time_to_limit_s)
      out.tightest = i;
  }
  if (!out.tightest) {
    // Nothing growing toward a limit: the one with the fewest bytes left before it.
    const auto headroom = [](const Limit& l) { return l.bytes - l.used; };
    for (std::size_t i = 0; i < out.all.size(); ++i)
      if (!out.tightest || headroom(out.all[i]) < headroom(out.all[*out.tightest]))
        out.tightest = i;
  }
  return out;
}

nlohmann::json trends_to_json(const std::map<std::string, SeriesTrend>& trends) {
  using nlohmann::json;
  json out = json::object();
  const auto number = [](const std::optional<double>& v) {
    return v && std::isfinite(*v) ? json(*v) : json(nullptr);
  };
  for (const auto& [name, t] : trends)
    out[name] = {
        {"slope_10s", number(t.slope_10s)}, {"slope_60s", number(t.slope_60s)}, {"peak", t.peak}};
  return out;
}

nlohmann::json limits_to_json(const Limits& limits) {
  using nlohmann::json;
  const auto number = [](const std::optional<double>& v) {
    return v && std::isfinite(*v) ? json(*v) : json(nullptr);
  };
  json all = json::array();
  for (const auto& l : limits.all) {
    all.push_back({{"name", l.name},
                   {"bytes", l.bytes},
                   {"used", l.used},
                   {"series", l.series},
                   {"slope", number(l.slope)},
                   {"time_to_limit_s", number(l.time_to_limit_s)}});
  }
  json tightest = nullptr;
  json time_to_limit = nullptr;
  if (limits.tightest) {
    const Limit& t = limits.all[*limits.tightest];
    tightest = {{"name", t.name}, {"bytes", t.bytes}};
    time_to_limit = number(t.time_to_limit_s);
  }
  return {{"tightest", tightest}, {"all", all}, {"time_to_limit_s", time_to_limit}};
}

}  // namespace kwd::timeline
