#include "kwd/util/clock.hpp"

#include <time.h>

#include <array>
#include <cstdio>

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
tm utc_parts(std::int64_t unix_ms) {
  const time_t secs = static_cast<time_t>(unix_ms / 1000);
  tm parts{};
  gmtime_r(&secs, &parts);
  return parts;
}
}  // namespace

std::string iso8601_utc(std::int64_t unix_ms) {
  const tm p = utc_parts(unix_ms);
  std::array<char, 96> buf{};
  std::snprintf(buf.data(), buf.size(), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", p.tm_year + 1900,
                p.tm_mon + 1, p.tm_mday, p.tm_hour, p.tm_min, p.tm_sec,
                static_cast<int>(unix_ms % 1000));
  return buf.data();
}

std::string compact_utc(std::int64_t unix_ms) {
  const tm p = utc_parts(unix_ms);
  std::array<char, 96> buf{};
  std::snprintf(buf.data(), buf.size(), "%04d%02d%02dT%02d%02d%02dZ", p.tm_year + 1900,
                p.tm_mon + 1, p.tm_mday, p.tm_hour, p.tm_min, p.tm_sec);
  return buf.data();
}

}  // namespace kwd::util
