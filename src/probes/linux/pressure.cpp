#include "kwd/probes/linux/pressure.hpp"

#include <charconv>
#include <cstdlib>
#include <string>

namespace kwd::probes::linux_proc {
namespace {

// "avg10=1.23" in `line` -> 1.23
std::optional<double> field(std::string_view line, std::string_view key) {
  const auto at = line.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  auto value = line.substr(at + key.size());
  value = value.substr(0, value.find(' '));
  // from_chars for double needs GCC 11+; strtod on a short copy is as good here.
  const std::string copy(value);
  char* end = nullptr;
  const double v = std::strtod(copy.c_str(), &end);
  if (end == copy.c_str()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<Pressure> parse_pressure(std::string_view text) {
  Pressure p;
  bool some = false;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t eol = text.find('\n', pos);
    const auto line =
        text.substr(pos, eol == std::string_view::npos ? text.size() - pos : eol - pos);
    const bool is_some = line.starts_with("some ");
    const bool is_full = line.starts_with("full ");
    if (is_some || is_full) {
      const auto a10 = field(line, "avg10="), a60 = field(line, "avg60="),
                 a300 = field(line, "avg300="), total = field(line, "total=");
      if (!a10 || !a60 || !a300 || !total) return std::nullopt;
      // total= counts microseconds: a value no int64 holds (or NaN) is not PSI text.
      if (!(*total >= 0 && *total < 0x1p63)) return std::nullopt;
      if (is_some) {
        p.some_avg10 = *a10, p.some_avg60 = *a60, p.some_avg300 = *a300;
        p.some_total_us = static_cast<std::int64_t>(*total);
        some = true;
      } else {
        p.full_avg10 = *a10, p.full_avg60 = *a60, p.full_avg300 = *a300;
        p.full_total_us = static_cast<std::int64_t>(*total);
        p.has_full = true;
      }
    }
    if (eol == std::string_view::npos) break;
    pos = eol + 1;
  }
  if (!some) return std::nullopt;
  return p;
}

}  // namespace kwd::probes::linux_proc
