#include "kwd/probes/drm/sysfs_device.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <system_error>
#include <vector>

namespace kwd::probes::drm {
namespace {

std::optional<std::uint64_t> read_number(const std::filesystem::path& path) {
  const auto line = read_first_line(path);
  if (!line) return std::nullopt;
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(line->data(), line->data() + line->size(), n);
  if (ec != std::errc() || end != line->data() + line->size()) return std::nullopt;
  return n;
}

// "0x1002" -> "1002"
std::string pci_hex(const std::optional<std::string>& id) {
  if (!id) return {};
  return id->starts_with("0x") ? id->substr(2) : *id;
}

}  // namespace

std::optional<std::string> read_first_line(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r'))
    line.pop_back();
  return line;
}

DrmDevice read_drm_device(const std::filesystem::path& root, const std::string& pdev,
                          const std::string& driver) {
  DrmDevice d;
  d.pdev = pdev;
  d.driver = driver;
  // A client without drm-pdev (a platform device, or a driver that leaves it out) names no
  // sysfs directory: only its driver is known.
  const auto dir = root / "sys/bus/pci/devices" / pdev;
  const auto vendor = pci_hex(pdev.empty() ? std::nullopt : read_first_line(dir / "vendor"));
  const auto device = pci_hex(pdev.empty() ? std::nullopt : read_first_line(dir / "device"));
  if (vendor == "1002" || driver == "amdgpu")
    d.vendor = "amd";
  else if (vendor == "8086" || driver == "i915" || driver == "xe")
    d.vendor = "intel";
  else
    d.vendor = vendor.empty() ? "unknown" : vendor;
  if (!vendor.empty()) d.pci_id = vendor + ":" + device;
  if (pdev.empty()) {
    d.name = driver;
    return d;
  }
  // amdgpu's product_name comes from the board's FRU data; consumer boards often leave it
  // empty.
  if (auto product = read_first_line(dir / "product_name"); product && !product->empty())
    d.name = *product;
  else
    d.name = driver + (d.pci_id.empty() ? "" : " " + d.pci_id);
  d.vram_total = read_number(dir / "mem_info_vram_total");
  d.vram_used = read_number(dir / "mem_info_vram_used");
  d.gtt_total = read_number(dir / "mem_info_gtt_total");
  d.gtt_used = read_number(dir / "mem_info_gtt_used");
  if (d.vram_total) {
    d.vram_source = "mem_info_vram_total";
    return d;
  }
  // xe: one tile<N> directory per tile, each with its VRAM size.
  std::vector<std::string> tiles;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const auto name = entry.path().filename().string();
    if (name.starts_with("tile")) tiles.push_back(name);
  }
  std::sort(tiles.begin(), tiles.end());
  std::uint64_t sum = 0;
  bool any = false;
  for (const auto& tile : tiles)
    if (auto size = read_number(dir / tile / "physical_vram_size_bytes")) {
      sum += *size;
      any = true;
    }
  if (any) {
    d.vram_total = sum;
    d.vram_source = "tile*/physical_vram_size_bytes";
  }
  return d;
}

}  // namespace kwd::probes::drm
