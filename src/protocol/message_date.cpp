#include "kwd/protocol/message_date.hpp"

#include <chrono>

namespace kwd::protocol {
namespace {

// Reads exactly `digits` digits at `at`: no sign, no space.
bool number(std::string_view s, std::size_t& at, int digits, int& out) {
  if (at + static_cast<std::size_t>(digits) > s.size()) return false;
  out = 0;
  for (const char c : s.substr(at, static_cast<std::size_t>(digits))) {
    if (c < '0' || c > '9') return false;
    out = out * 10 + (c - '0');
  }
  at += static_cast<std::size_t>(digits);
  return true;
}

bool expect(std::string_view s, std::size_t& at, char c) {
  if (at >= s.size() || s[at] != c) return false;
  ++at;
  return true;
}

}  // namespace

std::optional<std::int64_t> parse_message_date_us(std::string_view s) {
  std::size_t at = 0;
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!number(s, at, 4, year) || !expect(s, at, '-') || !number(s, at, 2, month) ||
      !expect(s, at, '-') || !number(s, at, 2, day))
    return std::nullopt;
  if (at >= s.size() || (s[at] != 'T' && s[at] != ' ')) return std::nullopt;
  ++at;
  if (!number(s, at, 2, hour) || !expect(s, at, ':') || !number(s, at, 2, minute) ||
      !expect(s, at, ':') || !number(s, at, 2, second))
    return std::nullopt;
  std::int64_t micros = 0;
  if (at < s.size() && s[at] == '.') {
    ++at;
    int scale = 100'000;  // digits past the sixth are below what anyone sends or reads
    const std::size_t start = at;
    while (at < s.size() && s[at] >= '0' && s[at] <= '9') {
      micros += (s[at] - '0') * scale;
      scale /= 10;
      ++at;
    }
    if (at == start) return std::nullopt;
  }
  int offset_minutes = 0;
  if (at < s.size() && s[at] == 'Z') {
    ++at;
  } else if (at < s.size() && (s[at] == '+' || s[at] == '-')) {
    const int sign = s[at] == '-' ? -1 : 1;
    ++at;
    int oh = 0, om = 0;
    if (!number(s, at, 2, oh)) return std::nullopt;
    if (at < s.size() && s[at] == ':') ++at;
    if (!number(s, at, 2, om)) return std::nullopt;
    offset_minutes = sign * (oh * 60 + om);
  }
  if (at != s.size()) return std::nullopt;

  using namespace std::chrono;
  const year_month_day ymd{std::chrono::year{year},
                           std::chrono::month{static_cast<unsigned>(month)},
                           std::chrono::day{static_cast<unsigned>(day)}};
  if (!ymd.ok() || hour > 23 || minute > 59 || second > 60) return std::nullopt;
  const auto days = sys_days{ymd}.time_since_epoch();
  const std::int64_t seconds_total = duration_cast<std::chrono::seconds>(days).count() +
                                     hour * 3600 + minute * 60 + second - offset_minutes * 60;
  return seconds_total * 1'000'000 + micros;
}

}  // namespace kwd::protocol
