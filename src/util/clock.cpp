#include "kwd/util/clock.hpp"

#include <time.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <iterator>

namespace kwd::util {

std::int64_t wall_ms() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

std::int64_t steady_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

namespace {
tm utc_parts(std::int64_t unix_s) {
  const time_t secs = static_cast<time_t>(unix_s);
  tm parts{};
  gmtime_r(&secs, &parts);
  return parts;
}

// "2026-11-21T18:05:12.<fraction>Z", the fraction `digits` wide.
std::string iso8601_utc_with(std::int64_t unix_s, int fraction, int digits) {
  const tm p = utc_parts(unix_s);
  std::array<char, 96> buf{};
  std::snprintf(buf.data(), buf.size(), "%04d-%02d-%02dT%02d:%02d:%02d.%0*dZ", p.tm_year + 1900,
                p.tm_mon + 1, p.tm_mday, p.tm_hour, p.tm_min, p.tm_sec, digits, fraction);
  return buf.data();
}
}  // namespace

std::string iso8601_utc(std::int64_t unix_ms) {
  return iso8601_utc_with(unix_ms / 1000, static_cast<int>(unix_ms % 1000), 3);
}

std::string iso8601_utc_us(std::int64_t unix_us) {
  return iso8601_utc_with(unix_us / 1'000'000, static_cast<int>(unix_us % 1'000'000), 6);
}

std::string compact_utc(std::int64_t unix_ms) {
  const tm p = utc_parts(unix_ms / 1000);
  std::array<char, 96> buf{};
  std::snprintf(buf.data(), buf.size(), "%04d%02d%02dT%02d%02d%02dZ", p.tm_year + 1900,
                p.tm_mon + 1, p.tm_mday, p.tm_hour, p.tm_min, p.tm_sec);
  return buf.data();
}

std::string local_wall_time(std::int64_t unix_ms) {
  const time_t secs = static_cast<time_t>(unix_ms / 1000);
  tm parts{};
  if (localtime_r(&secs, &parts) == nullptr) return iso8601_utc(unix_ms);
  std::array<char, 96> buf{};
  if (std::strftime(buf.data(), buf.size(), "%Y-%m-%d %H:%M:%S %Z", &parts) == 0)
    return iso8601_utc(unix_ms);
  return buf.data();
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds)) return "?";
  // Rounded first to what is shown, so that 59.97 s is "1 min" and -0.04 s is "0.0 s".
  const double magnitude = std::fabs(seconds);
  const double shown = magnitude < 9.95 ? std::round(magnitude * 10) / 10 : std::round(magnitude);
  const char* sign = seconds < 0 && shown > 0 ? "-" : "";
  std::array<char, 64> buf{};
  if (shown < 60) {
    std::snprintf(buf.data(), buf.size(), shown < 10 ? "%s%.1f s" : "%s%.0f s", sign, shown);
    return buf.data();
  }
  seconds = shown;
  // Whole units from here on: the larger one and the next, the smaller left out when zero.
  const auto whole = static_cast<long long>(std::min(seconds, 1e15));
  struct Unit {
    long long size;
    const char* name;
  };
  static constexpr Unit units[] = {{86400, "d"}, {3600, "h"}, {60, "min"}, {1, "s"}};
  for (std::size_t i = 0; i + 1 < std::size(units); ++i) {
    if (whole < units[i].size) continue;
    const long long big = whole / units[i].size;
    const long long small = whole % units[i].size / units[i + 1].size;
    if (small == 0)
      std::snprintf(buf.data(), buf.size(), "%s%lld %s", sign, big, units[i].name);
    else
      std::snprintf(buf.data(), buf.size(), "%s%lld %s %lld %s", sign, big, units[i].name, small,
                    units[i + 1].name);
    break;
  }
  return buf.data();
}

}  // namespace kwd::util
