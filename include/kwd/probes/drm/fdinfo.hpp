#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace kwd::probes::drm {

// One open DRM file as its /proc/<pid>/fdinfo/<fd> describes it: the key layout of the
// kernel's Documentation/gpu/drm-usage-stats.rst (drm-driver, drm-pdev, drm-client-id,
// drm-total-<region>, drm-memory-<region>, drm-engine-<engine>...) and the layout amdgpu wrote
// before that document existed (kernels 5.14 to 5.18: "pdev", "pasid", "vram mem"), which
// nvtop still reads. Pure: the text in, the values out, so each driver's layout is tested on
// its own.
struct DrmClient {
  std::string driver;  // drm-driver: amdgpu, i915, xe...
  std::string pdev;    // drm-pdev: the PCI address, "0000:03:00.0"; empty when not given
  // drm-client-id (the pre-standard amdgpu layout: its pasid, one per open file too). One
  // client seen through several descriptors or processes (dup, fork, SCM_RIGHTS) has one id.
  std::optional<std::uint64_t> client_id;
  // Bytes by memory region ("vram", "gtt", "vram0", "local0", "system0"): drm-total-<region>,
  // else the older drm-memory-<region> (amdgpu up to 6.10 prints only that).
  std::map<std::string, std::uint64_t> memory;
  // drm-resident-<region>: what of it is in place now, where the driver says.
  std::map<std::string, std::uint64_t> resident;
  // drm-engine-<engine>: nanoseconds the engine spent busy on this client's work.
  std::map<std::string, std::uint64_t> engine_ns;
  // drm-cycles-<engine> and drm-total-cycles-<engine> (xe): busy cycles against the GPU's
  // timestamp over the same span, the way xe reports engine time.
  std::map<std::string, std::uint64_t> cycles;
  std::map<std::string, std::uint64_t> total_cycles;
};

// The client an fdinfo text describes; nullopt when it is not a DRM file (no drm-driver and
// not the pre-standard amdgpu layout).
std::optional<DrmClient> parse_fdinfo(std::string_view text);

// A number with an optional unit as fdinfo writes sizes: "24576", "192 KiB", "16 MiB",
// "12 kB" (the pre-standard amdgpu layout's KiB); nullopt for anything else.
std::optional<std::uint64_t> parse_size(std::string_view value);

// Whether a region is the device's own memory (VRAM: amdgpu "vram", xe "vram0", i915
// "local0") rather than system memory the GPU maps (gtt, cpu, system, stolen-*).
bool device_local(std::string_view region);

}  // namespace kwd::probes::drm
