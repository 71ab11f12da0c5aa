#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace kwd::probes::drm {

// What sysfs says of one GPU, found by its PCI address under <root>/sys/bus/pci/devices/.
// amdgpu publishes its memory totals and use there (mem_info_vram_total, mem_info_vram_used,
// mem_info_gtt_total, mem_info_gtt_used); xe publishes each tile's VRAM size
// (tile<N>/physical_vram_size_bytes) but not its use; mainline i915 publishes neither, so an
// Intel device's use is unknown here and only its clients' sums are had.
struct DrmDevice {
  std::string pdev;
  std::string driver;  // as the client said (drm-driver)
  std::string vendor;  // "amd", "intel", or the PCI vendor id when neither
  std::string name;    // amdgpu's product_name when it has one, else "<driver> <vendor>:<device>"
  std::string pci_id;  // "1002:74a1", empty when not readable
  std::optional<std::uint64_t> vram_total;  // amdgpu mem_info_vram_total, xe tiles' sum
  std::optional<std::uint64_t> vram_used;   // amdgpu mem_info_vram_used
  std::optional<std::uint64_t> gtt_total;   // amdgpu mem_info_gtt_total
  std::optional<std::uint64_t> gtt_used;    // amdgpu mem_info_gtt_used
  std::string vram_source;  // which files vram_total came from, for the report's reader
};

// Reads what is there; any file missing leaves its field empty.
DrmDevice read_drm_device(const std::filesystem::path& root, const std::string& pdev,
                          const std::string& driver);

// The first line of a small sysfs/procfs file, trimmed; nullopt when it cannot be read.
std::optional<std::string> read_first_line(const std::filesystem::path& path);

}  // namespace kwd::probes::drm
