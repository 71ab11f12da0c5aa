// The DRM fdinfo probe on the trees of tests/fixtures/drm/ (one per driver and key layout,
// written from the kernel's documentation and the drivers' source; see its README): the
// parsers on their own, then the probe reading a tree as its root.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kwd/probes/drm/client_scan.hpp"
#include "kwd/probes/drm/drm_probe.hpp"
#include "kwd/probes/drm/fdinfo.hpp"
#include "kwd/probes/drm/sysfs_device.hpp"
#include "kwd/timeline/memory_sample.hpp"

using namespace kwd::probes;
using namespace kwd::probes::drm;
namespace fs = std::filesystem;

namespace {

const fs::path kTrees = fs::path(KWD_SOURCE_DIR) / "tests/fixtures/drm";
constexpr std::uint64_t kDrmKiB = 1024, kDrmMiB = 1024 * kDrmKiB, kDrmGiB = 1024 * kDrmMiB;

std::string text_of(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The probe on a tree, the kernel being `root` with `members`, read once.
struct Reading {
  nlohmann::json report = nlohmann::json::object();
  kwd::timeline::MemorySample sample;
  ProbeStatus status;
};
Reading read_tree(const std::string& tree, pid_t root, std::vector<pid_t> members) {
  ProbeOptions options;
  options.kernel_pid = root;
  options.drm_root = kTrees / tree;
  options.processes = std::make_shared<KernelProcesses>(root);
  options.processes->set_members(std::move(members));
  DrmProbe probe(options);
  Reading r;
  probe.sample(r.sample);
  probe.contribute(r.report);
  r.status = probe.status();
  return r;
}

}  // namespace

TEST_CASE("sizes in fdinfo: bytes, KiB, MiB and amdgpu's early kB", "[drm]") {
  CHECK(parse_size("0") == 0u);
  CHECK(parse_size("24576") == 24576u);
  CHECK(parse_size("192 KiB") == 192 * kDrmKiB);
  CHECK(parse_size("16 MiB") == 16 * kDrmMiB);
  CHECK(parse_size("3145728 kB") == 3 * kDrmGiB);
  CHECK_FALSE(parse_size("12 ns"));
  CHECK_FALSE(parse_size("KiB"));
  CHECK_FALSE(parse_size("12.5%"));
}

TEST_CASE("amdgpu's drm-memory layout: regions, engines, the client and its device", "[drm]") {
  const auto c = parse_fdinfo(text_of(kTrees / "amdgpu-drm-memory/proc/4100/fdinfo/5"));
  REQUIRE(c);
  CHECK(c->driver == "amdgpu");
  CHECK(c->pdev == "0000:c1:00.0");
  CHECK(c->client_id == 1021u);
  CHECK(c->memory.at("vram") == 8388608 * kDrmKiB);
  // "drm-memory-gtt: \t65536 KiB": a space before the tab, as amdgpu prints it.
  CHECK(c->memory.at("gtt") == 65536 * kDrmKiB);
  CHECK(c->memory.at("cpu") == 0u);
  CHECK(c->engine_ns.at("gfx") == 1500000u);
  CHECK(c->engine_ns.at("compute") == 920000000u);
  // amd-* keys are amdgpu's own: not regions.
  CHECK(c->memory.size() == 3);
}

TEST_CASE("amdgpu's drm-total layout: totals and resident by region, MiB units", "[drm]") {
  const auto c = parse_fdinfo(text_of(kTrees / "amdgpu-drm-total/proc/5200/fdinfo/11"));
  REQUIRE(c);
  CHECK(c->client_id == 77u);
  CHECK(c->memory.at("vram") == 20 * kDrmGiB);
  CHECK(c->memory.at("gtt") == 4 * kDrmMiB);
  CHECK(c->resident.at("vram") == 20 * kDrmGiB);
  CHECK(c->engine_ns.at("compute") == 48000000000u);
}

TEST_CASE("amdgpu before drm-usage-stats: pdev, pasid, vram mem in kB", "[drm]") {
  const auto c = parse_fdinfo(text_of(kTrees / "amdgpu-pre-standard/proc/6300/fdinfo/8"));
  REQUIRE(c);
  CHECK(c->driver == "amdgpu");
  CHECK(c->pdev == "0000:0a:00.0");
  CHECK(c->client_id == 32770u);  // its pasid: one per open file
  CHECK(c->memory.at("vram") == 3 * kDrmGiB);
  CHECK(c->memory.at("gtt") == 8 * kDrmMiB);
  CHECK(c->engine_ns.empty());  // "gfx0: 12.50%" is a share, not a busy time
}

TEST_CASE("i915: system0/local0 regions and engine classes in ns", "[drm]") {
  const auto c = parse_fdinfo(text_of(kTrees / "i915/proc/7400/fdinfo/12"));
  REQUIRE(c);
  CHECK(c->driver == "i915");
  CHECK(c->memory.at("local0") == 6 * kDrmGiB);
  CHECK(c->memory.at("system0") == 96 * kDrmMiB);
  CHECK(c->memory.at("stolen-local0") == 0u);
  CHECK(c->engine_ns.at("render") == 9122000000u);
  CHECK(c->engine_ns.at("video-enhance") == 0u);
  // drm-engine-capacity-video is a count of engines, not an engine named "capacity-video".
  CHECK_FALSE(c->engine_ns.contains("capacity-video"));
  CHECK(device_local("local0"));
  CHECK_FALSE(device_local("system0"));
  CHECK_FALSE(device_local("stolen-local0"));
}

TEST_CASE("xe: vram0 and cycles against the GPU's timestamp", "[drm]") {
  const auto c = parse_fdinfo(text_of(kTrees / "xe/proc/8500/fdinfo/6"));
  REQUIRE(c);
  CHECK(c->driver == "xe");
  CHECK(c->memory.at("vram0") == 10 * kDrmGiB);
  CHECK(c->memory.at("gtt") == 192 * kDrmKiB);
  // drm-total-cycles-rcs is the timestamp, not a memory region called "cycles-rcs".
  CHECK_FALSE(c->memory.contains("cycles-rcs"));
  CHECK(c->cycles.at("ccs") == 3100000000u);
  CHECK(c->total_cycles.at("ccs") == 7655183225u);
  CHECK(device_local("vram0"));
}

TEST_CASE("a descriptor that is not DRM gives no client", "[drm]") {
  CHECK_FALSE(parse_fdinfo("pos:\t0\nflags:\t02\nmnt_id:\t15\nino:\t42\n"));
  CHECK_FALSE(parse_fdinfo(""));
}

TEST_CASE("one client through a dup'ed and an inherited descriptor is counted once", "[drm]") {
  const auto scan = scan_clients(kTrees / "amdgpu-drm-memory", {4100, 4101});
  CHECK(scan.drm_descriptors == 4);  // fds 5 and 7 of the kernel, 5 and 9 of its child
  CHECK(scan.duplicates == 2);
  REQUIRE(scan.clients.size() == 2);
  CHECK(scan.clients[0].pid == 4100);
  CHECK(scan.clients[0].client.client_id == 1021u);
  CHECK(scan.clients[1].pid == 4101);
  CHECK(scan.clients[1].client.client_id == 1022u);
  // A process not given is not read, and a pid not there is no problem.
  CHECK(scan_clients(kTrees / "amdgpu-drm-memory", {4101, 999999}).clients.size() == 2);
}

TEST_CASE("sysfs: amdgpu's totals and use, xe's tiles, i915's nothing", "[drm]") {
  const auto amd = read_drm_device(kTrees / "amdgpu-drm-memory", "0000:c1:00.0", "amdgpu");
  CHECK(amd.vendor == "amd");
  CHECK(amd.name == "AMD Instinct MI300X");
  CHECK(amd.pci_id == "1002:74a1");
  CHECK(amd.vram_total == 192 * kDrmGiB);
  CHECK(amd.vram_used == 190 * kDrmGiB);
  CHECK(amd.gtt_used == 80 * kDrmMiB);
  // An empty product_name (consumer boards): named by driver and PCI id.
  CHECK(read_drm_device(kTrees / "amdgpu-drm-total", "0000:03:00.0", "amdgpu").name ==
        "amdgpu 1002:744c");
  const auto xe = read_drm_device(kTrees / "xe", "0000:03:00.0", "xe");
  CHECK(xe.vendor == "intel");
  CHECK(xe.vram_total == 12 * kDrmGiB);
  CHECK_FALSE(xe.vram_used);
  const auto i915 = read_drm_device(kTrees / "i915", "0000:03:00.0", "i915");
  CHECK(i915.vendor == "intel");
  CHECK_FALSE(i915.vram_total);
  CHECK_FALSE(i915.vram_used);
}

TEST_CASE("the probe on amdgpu: the kernel's VRAM in the samples, the device's limit", "[drm]") {
  const auto r = read_tree("amdgpu-drm-memory", 4100, {4100, 4101});
  CHECK(r.status.available);
  CHECK(r.sample.gpu_used == static_cast<std::int64_t>(8 * kDrmGiB + 1 * kDrmGiB));
  CHECK(r.sample.gpu_total == static_cast<std::int64_t>(192 * kDrmGiB));
  CHECK(r.sample.gpu_device_used == static_cast<std::int64_t>(190 * kDrmGiB));
  CHECK(r.sample.gpu_sampled_at_ms > 0);
  const auto& gpu = r.report.at("drm_gpu");
  CHECK(gpu.at("source") == "drm-fdinfo");
  CHECK(gpu.at("drm_descriptors") == 4);
  CHECK(gpu.at("duplicate_descriptors") == 2);
  REQUIRE(gpu.at("devices").size() == 1);
  const auto& dev = gpu.at("devices")[0];
  CHECK(dev.at("vendor") == "amd");
  CHECK(dev.at("driver") == "amdgpu");
  CHECK(dev.at("pdev") == "0000:c1:00.0");
  CHECK(dev.at("memory_free") == 2 * kDrmGiB);
  REQUIRE(gpu.at("processes").size() == 2);
  const auto& kernel = gpu.at("processes")[0];
  CHECK(kernel.at("pid") == 4100);
  CHECK(kernel.at("used_memory") == 8 * kDrmGiB);
  CHECK(kernel.at("system_memory") == 64 * kDrmMiB);
  CHECK(kernel.at("engine_busy_ns").at("compute") == 920000000u);
  CHECK(gpu.at("processes")[1].at("used_memory") == 1 * kDrmGiB);
}

TEST_CASE("the probe on xe: two clients of one process summed, a size but no use", "[drm]") {
  auto r = read_tree("xe", 8500, {8500});
  CHECK(r.sample.gpu_used == static_cast<std::int64_t>(10 * kDrmGiB + 8 * kDrmMiB));
  // xe publishes the tiles' size and not their use: no limit is made of half a figure.
  CHECK(r.sample.gpu_total == kwd::timeline::kUnknown);
  const auto& dev = r.report.at("drm_gpu").at("devices")[0];
  CHECK(dev.at("memory_total") == 12 * kDrmGiB);
  CHECK(dev.at("memory_used").is_null());
  CHECK(dev.at("memory_total_source") == "tile*/physical_vram_size_bytes");
  const auto& p = r.report.at("drm_gpu").at("processes")[0];
  CHECK(p.at("client_ids") == nlohmann::json::array({3, 4}));
  CHECK(p.at("engine_cycles").at("rcs") == 28257900u);
}

TEST_CASE("the probe on i915 and on amdgpu's older layouts", "[drm]") {
  auto i915 = read_tree("i915", 7400, {7400});
  CHECK(i915.sample.gpu_used == static_cast<std::int64_t>(6 * kDrmGiB));
  CHECK(i915.report.at("drm_gpu").at("devices")[0].at("memory_total").is_null());
  CHECK(i915.report.at("drm_gpu").at("processes")[0].at("system_memory") == 96 * kDrmMiB);
  auto total = read_tree("amdgpu-drm-total", 5200, {5200});
  CHECK(total.sample.gpu_used == static_cast<std::int64_t>(20 * kDrmGiB));
  auto early = read_tree("amdgpu-pre-standard", 6300, {6300});
  CHECK(early.sample.gpu_used == static_cast<std::int64_t>(3 * kDrmGiB));
  CHECK(early.sample.gpu_total == static_cast<std::int64_t>(16 * kDrmGiB));
}

TEST_CASE("a kernel with no DRM client says nothing of the GPU", "[drm]") {
  // The tree's processes are not the kernel's: pid 1 has no descriptors there.
  auto r = read_tree("amdgpu-drm-memory", 1, {1});
  CHECK_FALSE(r.status.available);
  CHECK(r.status.reason == "no DRM client (AMD/Intel GPU) among the kernel's processes");
  CHECK(r.sample.gpu_used == kwd::timeline::kUnknown);
  CHECK_FALSE(r.report.contains("drm_gpu"));
  // Without dev/dri the machine has no DRM device at all, and says so.
  ProbeOptions options;
  options.kernel_pid = 1;
  options.drm_root = kTrees / "no-such-tree";
  CHECK(DrmProbe(options).status().reason ==
        "no /dev/dri on this machine: no AMD or Intel GPU to read");
}
