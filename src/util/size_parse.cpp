#include "kwd/util/size_parse.hpp"

#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace kwd::util {

std::optional<std::uint64_t> parse_size(std::string_view text) {
  std::string s(text);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.pop_back();
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double number = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !std::isfinite(number) || number < 0) return std::nullopt;
  std::string unit(end);
  for (auto& c : unit)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.ends_with("IB"))
    unit.erase(unit.size() - 2);
  else if (unit.size() == 2 && unit[1] == 'B')
    unit.erase(1);
  double scale = 1;
  if (unit.empty() || unit == "B")
    scale = 1;
  else if (unit == "K")
    scale = 1024.0;
  else if (unit == "M")
    scale = 1024.0 * 1024;
  else if (unit == "G")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "T")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else
    return std::nullopt;
  const double bytes = number * scale;
  if (bytes >= 1.8e19) return std::nullopt;
  return static_cast<std::uint64_t>(bytes);
}

std::string format_bytes(double bytes) {
  static constexpr std::array<const char*, 5> kUnits{"B", "KiB", "MiB", "GiB", "TiB"};
  std::size_t unit = 0;
  double value = bytes;
  while (std::fabs(value) >= 1024.0 && unit + 1 < kUnits.size()) {
    value /= 1024.0;
    ++unit;
  }
  std::array<char, 32> buf{};
  if (unit == 0)
    std::snprintf(buf.data(), buf.size(), "%.0f B", value);
  else
    std::snprintf(buf.data(), buf.size(), "%.1f %s", value, kUnits[unit]);
  return buf.data();
}

}  // namespace kwd::util
