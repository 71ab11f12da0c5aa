#include "kwd/probes/drm/drm_probe.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <system_error>

#include "kwd/probes/drm/client_scan.hpp"
#include "kwd/util/clock.hpp"

namespace kwd::probes::drm {
namespace {

void add_known(std::int64_t& field, std::uint64_t value) {
  // NVML may have filled the field already: a machine with both vendors' GPUs sums them.
  field = (field >= 0 ? field : 0) + static_cast<std::int64_t>(value);
}

nlohmann::json optional_number(const std::optional<std::uint64_t>& n) {
  return n ? nlohmann::json(*n) : nlohmann::json(nullptr);
}

}  // namespace

DrmProbe::DrmProbe(const ProbeOptions& options)
    : root_(options.drm_root),
      processes_(options.processes ? options.processes
                                   : std::make_shared<KernelProcesses>(options.kernel_pid)),
      interval_(options.gpu_interval) {
  std::error_code ec;
  dev_dri_ = std::filesystem::is_directory(root_ / "dev/dri", ec);
}

std::size_t DrmProbe::device_index(const std::string& driver, const std::string& pdev) {
  for (std::size_t i = 0; i < devices_.size(); ++i)
    if (devices_[i].driver == driver && devices_[i].pdev == pdev) return i;
  devices_.push_back(read_drm_device(root_, pdev, driver));
  return devices_.size() - 1;
}

void DrmProbe::read() {
  last_read_ms_ = util::steady_ms();
  sampled_at_ms_ = util::wall_ms();
  std::vector<pid_t> pids{processes_->root()};
  for (const pid_t p : processes_->members())
    if (p != processes_->root()) pids.push_back(p);
  auto scan = scan_clients(root_, pids);
  descriptors_ = scan.drm_descriptors;
  duplicates_ = scan.duplicates;
  for (auto& p : scan.problems)
    if (std::find(problems_.begin(), problems_.end(), p) == problems_.end() &&
        problems_.size() < 16)
      problems_.push_back(std::move(p));
  // What each process holds now; a process that closed its clients holds nothing.
  for (auto& t : tracked_) {
    t.used = t.system = 0;
    t.regions.clear();
    t.client_ids.clear();
  }
  for (const auto& held : scan.clients) {
    const auto& c = held.client;
    if (devices_.size() >= kDevicesKept &&
        std::none_of(devices_.begin(), devices_.end(),
                     [&](const DrmDevice& d) { return d.driver == c.driver && d.pdev == c.pdev; }))
      continue;
    const std::size_t device = device_index(c.driver, c.pdev);
    auto it = std::find_if(tracked_.begin(), tracked_.end(), [&](const Tracked& t) {
      return t.pid == held.pid && t.device == device;
    });
    if (it == tracked_.end()) {
      if (tracked_.size() >= kProcessesKept) continue;
      tracked_.push_back({});
      it = tracked_.end() - 1;
      it->pid = held.pid;
      it->device = device;
    }
    seen_any_ = true;
    for (const auto& [region, bytes] : c.memory) {
      it->regions[region] += bytes;
      (device_local(region) ? it->used : it->system) += bytes;
    }
    // Busy time only grows (the document: a smaller value is a late update, keep the larger).
    for (const auto& [engine, ns] : c.engine_ns)
      it->engine_ns[engine] = std::max(it->engine_ns[engine], ns);
    for (const auto& [engine, n] : c.cycles)
      it->cycles[engine] = std::max(it->cycles[engine], n);
    for (const auto& [engine, n] : c.total_cycles)
      it->total_cycles[engine] = std::max(it->total_cycles[engine], n);
    if (c.client_id) it->client_ids.push_back(*c.client_id);
    it->peak_used = std::max(it->peak_used, it->used);
    it->last_seen_ms = sampled_at_ms_;
  }
  for (auto& t : tracked_)
    t.peak_used = std::max(t.peak_used, t.used);
  // The devices' totals and use change with every process on them: read again each time.
  for (auto& d : devices_)
    d = read_drm_device(root_, d.pdev, d.driver);
}

void DrmProbe::on_cell_edge(bool running, std::int64_t /*at_ms*/, bool sampled) {
  // A cell's end is read before the next cell starts, as NVML's is: its allocation counts
  // for the cell that made it.
  if (!running && sampled && seen_any_) read();
}

void DrmProbe::sample(timeline::MemorySample& into) {
  if (last_read_ms_ < 0 || util::steady_ms() - last_read_ms_ >= interval_.count()) read();
  // Nothing is said until a client was seen: a kernel that never opened a GPU, on a
  // machine with an NVIDIA one, must not show "GPU 0 B" beside NVML's figure.
  if (!seen_any_) return;
  std::uint64_t ours = 0;
  for (const auto& t : tracked_)
    ours += t.used;
  add_known(into.gpu_used, ours);
  into.gpu_sampled_at_ms = sampled_at_ms_;
  // A device's total joins the limit only with its use (amdgpu publishes both; xe only the
  // size): a total without the use beside it would make the device look empty.
  for (const auto& d : devices_)
    if (d.vram_total && d.vram_used) {
      add_known(into.gpu_total, *d.vram_total);
      add_known(into.gpu_device_used, *d.vram_used);
    }
}

ProbeStatus DrmProbe::status() const {
  if (seen_any_)
    return {"drm-fdinfo", true,
            std::to_string(devices_.size()) +
                " DRM device(s) used by the kernel, read from /proc/<pid>/fdinfo and sysfs"};
  return {"drm-fdinfo", false,
          dev_dri_ ? "no DRM client (AMD/Intel GPU) among the kernel's processes"
                   : "no /dev/dri on this machine: no AMD or Intel GPU to read"};
}

void DrmProbe::contribute(nlohmann::json& report) const {
  // Only a kernel that used a DRM GPU gets the section; the probe's state is under `probes`.
  if (!seen_any_) return;
  using nlohmann::json;
  const auto st = status();
  json gpu;
  gpu["source"] = "drm-fdinfo";
  gpu["available"] = st.available;
  gpu["reason"] = st.reason;
  auto& devices = gpu["devices"] = json::array();
  for (std::size_t i = 0; i < devices_.size(); ++i) {
    const auto& d = devices_[i];
    json dev = {{"index", i},         {"name", d.name}, {"vendor", d.vendor},
                {"driver", d.driver}, {"pdev", d.pdev}, {"pci_id", d.pci_id}};
    dev["memory_total"] = optional_number(d.vram_total);
    dev["memory_used"] = optional_number(d.vram_used);
    dev["memory_free"] = d.vram_total && d.vram_used && *d.vram_total >= *d.vram_used
                             ? json(*d.vram_total - *d.vram_used)
                             : json(nullptr);
    dev["gtt_total"] = optional_number(d.gtt_total);
    dev["gtt_used"] = optional_number(d.gtt_used);
    dev["memory_total_source"] = d.vram_source.empty() ? json(nullptr) : json(d.vram_source);
    devices.push_back(std::move(dev));
  }
  auto& procs = gpu["processes"] = json::array();
  for (const auto& t : tracked_)
    procs.push_back({{"pid", t.pid},
                     {"device", t.device},
                     {"used_memory", t.used},
                     {"peak_used_memory", t.peak_used},
                     {"system_memory", t.system},
                     {"regions", t.regions},
                     {"engine_busy_ns", t.engine_ns},
                     {"engine_cycles", t.cycles},
                     {"engine_total_cycles", t.total_cycles},
                     {"client_ids", t.client_ids},
                     {"last_seen_ms", t.last_seen_ms}});
  gpu["drm_descriptors"] = descriptors_;
  gpu["duplicate_descriptors"] = duplicates_;
  gpu["problems"] = problems_;
  gpu["sampled_at_ms"] = sampled_at_ms_ > 0 ? json(sampled_at_ms_) : json(nullptr);
  report["drm_gpu"] = std::move(gpu);
}

}  // namespace kwd::probes::drm
