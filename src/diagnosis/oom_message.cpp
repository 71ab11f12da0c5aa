#include "kwd/diagnosis/oom_message.hpp"

#include <cmath>
#include <regex>
#include <string>

namespace kwd::diagnosis {
namespace {

// "8.00 GiB", "569.81 MiB", "1006.00 MiB", "285212672 bytes".
std::optional<std::int64_t> size_of(const std::string& number, const std::string& unit) {
  double value = 0;
  try {
    value = std::stod(number);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  double scale = 1;
  if (unit == "KiB" || unit == "KB") scale = 1024.0;
  if (unit == "MiB" || unit == "MB") scale = 1024.0 * 1024;
  if (unit == "GiB" || unit == "GB") scale = 1024.0 * 1024 * 1024;
  if (unit == "TiB" || unit == "TB") scale = 1024.0 * 1024 * 1024 * 1024;
  const double bytes = value * scale;
  if (!std::isfinite(bytes) || bytes < 0 || bytes > 9e18) return std::nullopt;
  return static_cast<std::int64_t>(std::llround(bytes));
}

constexpr const char* kSize = R"(([0-9]+(?:\.[0-9]+)?) ?(bytes|[KMGT]i?B))";

// Compiled once: an icase regex takes far longer to build than to run on one quoted line.
std::regex size_pattern(const std::string& before, const std::string& after = "") {
  return std::regex(before + kSize + after, std::regex::icase);
}

std::optional<std::int64_t> find_size(const std::string& line, const std::regex& re) {
  std::smatch m;
  if (!std::regex_search(line, m, re)) return std::nullopt;
  return size_of(m[1].str(), m[2].str());
}

}  // namespace

OomNumbers parse_oom_numbers(std::string_view text) {
  // The lines quoted are a few hundred bytes; a pathological one is not worth the regexes.
  constexpr std::size_t kMaxQuoted = 4096;
  const std::string line(text.substr(0, kMaxQuoted));
  OomNumbers n;
  static const std::regex requested =
      size_pattern(R"((?:[Tt]ried to allocate|trying to allocate) )");
  static const std::regex capacity = size_pattern(R"(total capacity of )");
  static const std::regex free_of = size_pattern(R"(of which )", R"( (?:is )?free)");
  static const std::regex free_after = size_pattern(R"(; )", R"( free)");
  static const std::regex this_process = size_pattern(R"(this process has )", R"( memory in use)");
  n.requested = find_size(line, requested);
  n.capacity = find_size(line, capacity);
  n.free = find_size(line, free_of);
  if (!n.free) n.free = find_size(line, free_after);
  n.this_process = find_size(line, this_process);
  static const std::regex holder(std::string(R"([Pp]rocess ([0-9]+) has )") + kSize +
                                 R"( memory in use)");
  for (auto it = std::sregex_iterator(line.begin(), line.end(), holder);
       it != std::sregex_iterator(); ++it) {
    const auto bytes = size_of((*it)[2].str(), (*it)[3].str());
    std::int64_t pid = 0;
    try {
      pid = std::stoll((*it)[1].str());
    } catch (const std::exception&) {
      continue;
    }
    if (bytes) n.holders.push_back({pid, *bytes});
  }
  return n;
}

}  // namespace kwd::diagnosis
