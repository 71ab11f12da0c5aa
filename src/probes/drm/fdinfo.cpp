#include "kwd/probes/drm/fdinfo.hpp"

#include <charconv>

namespace kwd::probes::drm {
namespace {

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r");
  return s.substr(first, last - first + 1);
}

// The leading unsigned number of `s` and what follows it (trimmed); nullopt without digits.
std::optional<std::pair<std::uint64_t, std::string_view>> number_and_unit(std::string_view s) {
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || end == s.data()) return std::nullopt;
  return std::pair{n, trim(s.substr(static_cast<std::size_t>(end - s.data())))};
}

std::optional<std::uint64_t> parse_plain(std::string_view value, std::string_view unit) {
  const auto nu = number_and_unit(value);
  if (!nu || nu->second != unit) return std::nullopt;
  return nu->first;
}

bool starts(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// The pre-standard amdgpu layout names regions "vram mem", "gtt mem", "cpu mem".
std::optional<std::string> legacy_amdgpu_region(std::string_view key) {
  for (std::string_view region : {"vram", "gtt", "cpu"})
    if (key.size() == region.size() + 4 && starts(key, region) &&
        key.substr(region.size()) == " mem")
      return std::string(region);
  return std::nullopt;
}

}  // namespace

std::optional<std::uint64_t> parse_size(std::string_view value) {
  const auto nu = number_and_unit(trim(value));
  if (!nu) return std::nullopt;
  const auto [n, unit] = *nu;
  if (unit.empty()) return n;
  if (unit == "KiB" || unit == "kB") return n * 1024;
  if (unit == "MiB") return n * 1024 * 1024;
  if (unit == "GiB") return n * 1024 * 1024 * 1024;
  return std::nullopt;
}

bool device_local(std::string_view region) {
  return starts(region, "vram") || starts(region, "local");
}

std::optional<DrmClient> parse_fdinfo(std::string_view text) {
  DrmClient c;
  bool legacy_amdgpu = false;  // "pdev:" and "pasid:" without drm-driver
  std::optional<std::uint64_t> pasid;
  std::map<std::string, std::uint64_t> legacy_memory;  // drm-memory-<region>
  while (!text.empty()) {
    const auto eol = text.find('\n');
    const auto line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const auto key = trim(line.substr(0, colon));
    const auto value = trim(line.substr(colon + 1));
    if (key == "drm-driver") {
      c.driver = std::string(value);
    } else if (key == "drm-pdev" || key == "pdev") {
      c.pdev = std::string(value);
      legacy_amdgpu = legacy_amdgpu || key == "pdev";
    } else if (key == "drm-client-id") {
      c.client_id = parse_plain(value, "");
    } else if (key == "pasid") {
      pasid = parse_plain(value, "");
    } else if (starts(key, "drm-total-cycles-")) {
      if (auto n = parse_plain(value, "")) c.total_cycles[std::string(key.substr(17))] = *n;
    } else if (starts(key, "drm-cycles-")) {
      if (auto n = parse_plain(value, "")) c.cycles[std::string(key.substr(11))] = *n;
    } else if (starts(key, "drm-engine-capacity-")) {
      // How many engines of the class share the figure: not needed for busy time.
    } else if (starts(key, "drm-engine-")) {
      if (auto n = parse_plain(value, "ns")) c.engine_ns[std::string(key.substr(11))] = *n;
    } else if (starts(key, "drm-total-")) {
      if (auto n = parse_size(value)) c.memory[std::string(key.substr(10))] = *n;
    } else if (starts(key, "drm-resident-")) {
      if (auto n = parse_size(value)) c.resident[std::string(key.substr(13))] = *n;
    } else if (starts(key, "drm-memory-")) {
      if (auto n = parse_size(value)) legacy_memory[std::string(key.substr(11))] = *n;
    } else if (auto region = legacy_amdgpu_region(key)) {
      if (auto n = parse_size(value)) legacy_memory[*region] = *n;
    }
  }
  if (c.driver.empty()) {
    if (!legacy_amdgpu || !pasid) return std::nullopt;
    c.driver = "amdgpu";
  }
  if (!c.client_id && legacy_amdgpu) c.client_id = pasid;
  // drm-memory-<region> is the older name of drm-total-<region>; amdgpu printed both for a
  // while, and the newer one wins.
  for (auto& [region, bytes] : legacy_memory)
    c.memory.emplace(region, bytes);
  return c;
}

}  // namespace kwd::probes::drm
