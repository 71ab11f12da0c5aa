#include "kwd/probes/nvml/nvml_probe.hpp"

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "kwd/probes/host_sources.hpp"
#include "kwd/probes/process_identity.hpp"

namespace kwd::probes::nvml {

std::filesystem::path NvmlProbe::library_path(const std::filesystem::path& option) {
  if (!option.empty()) return option;
  if (const char* env = std::getenv("KERNEL_WATCHDOG_NVML"); env != nullptr && *env != '\0')
    return env;
  return {};
}

NvmlProbe::NvmlProbe(const ProbeOptions& options)
    : library_(library_path(options.nvml_library)),
      processes_(options.processes ? options.processes
                                   : std::make_shared<KernelProcesses>(options.kernel_pid)),
      worker_(host_source<NvmlWorker>(
          options.host, library_.string() + "@" + std::to_string(options.gpu_interval.count()),
          [&] { return std::make_shared<NvmlWorker>(library_, options.gpu_interval); },
          [](NvmlWorker& worker) { return worker.unavailable(); })),
      xid_cursor_(worker_->xid_events_end()) {
  // Without a driver, dlopen fails in microseconds: wait that long so the start-up status is
  // the real one. A driver that takes longer to initialise is not waited for.
  if (worker_->wait_started(std::chrono::milliseconds(100))) refresh();
}

void NvmlProbe::on_cell_edge(bool running, std::int64_t at_ms, bool sampled) {
  // A start needs nothing: between the last cell's end (read then) and it, nothing ran. An
  // end is read before the next cell can start, or its first allocation counts as ours, and
  // an Xid taken with it happened by that end (a fault the kernel survived must not pass
  // for one of the next cell).
  if (running || state_.phase != GpuState::Phase::running) return;
  // Before the end's own millisecond, which the next cell's start can share.
  const std::int64_t placed_at = at_ms - 1;
  for (auto& x : xids_)  // taken since the end, before the loop heard of it
    x.t_ms = std::min(x.t_ms, placed_at);
  std::uint64_t request = 0;
  worker_->sample_and_wait(sampled ? kEdgeWait : std::chrono::microseconds(0), &request);
  if (request != 0) {
    if (ends_asked_.size() >= kEndsPending) ends_asked_.pop_front();
    ends_asked_.push_back({request, placed_at});
  }
  refresh();
}

ProbeStatus NvmlProbe::status() const {
  switch (state_.phase) {
    case GpuState::Phase::running:
      return {"nvml", true, state_.reason};
    case GpuState::Phase::unavailable:
      return {"nvml", false, state_.reason};
    case GpuState::Phase::starting:
      break;
  }
  return {"nvml", false, "NVML still loading (" + library_.string() + ")"};
}

void NvmlProbe::refresh() {
  if (worker_->copy_if_newer(generation_, state_)) {
    if (state_.phase != GpuState::Phase::running) return;
    std::int64_t ours = 0, used = 0, total = 0;
    bool any_processes_known = false;
    for (const auto& dev : state_.devices) {
      if (dev.memory) {
        used += static_cast<std::int64_t>(dev.memory->used);
        total += static_cast<std::int64_t>(dev.memory->total);
      }
      if (!dev.processes_known) continue;
      any_processes_known = true;
      for (const auto& p : dev.processes) {
        if (!processes_->belongs(static_cast<pid_t>(p.pid))) continue;
        if (p.used_memory) ours += static_cast<std::int64_t>(*p.used_memory);
        auto it = std::find_if(tracked_.begin(), tracked_.end(), [&](const TrackedProcess& t) {
          return t.pid == p.pid && t.device == dev.index;
        });
        if (it == tracked_.end()) {
          if (tracked_.size() >= kProcessesKept) continue;
          tracked_.push_back({p.pid, dev.index, std::nullopt, 0, 0});
          it = tracked_.end() - 1;
        }
        it->used_memory = p.used_memory;
        if (p.used_memory) it->peak_used_memory = std::max(it->peak_used_memory, *p.used_memory);
        it->last_seen_ms = state_.sampled_at_ms;
      }
    }
    const bool memory_known =
        std::any_of(state_.devices.begin(), state_.devices.end(),
                    [](const GpuDeviceState& d) { return d.memory.has_value(); });
    gpu_used_ = any_processes_known ? ours : -1;
    gpu_device_used_ = memory_known ? used : -1;
    gpu_total_ = memory_known ? total : -1;
  }
  // Read before the events: once the answer to a cell end's request is published, every
  // event its look took is among those followed now.
  const std::uint64_t served = worker_->served();
  xids_dropped_ += worker_->follow_xid_events(xid_cursor_, incoming_);
  for (auto& e : incoming_) {
    const auto end = std::find_if(ends_asked_.begin(), ends_asked_.end(),
                                  [&](const EndAsked& a) { return e.served_before < a.request; });
    if (end != ends_asked_.end()) e.t_ms = std::min(e.t_ms, end->placed_at_ms);
    attribute(e);
  }
  incoming_.clear();
  while (!ends_asked_.empty() && ends_asked_.front().request <= served)
    ends_asked_.pop_front();
}

void NvmlProbe::attribute(const XidEvent& event) {
  RecordedXid rec{event.t_ms, event.xid, event.device, std::nullopt};
  // Prefer who was on the device at the moment of the event; else the kernel's last known
  // process on that device.
  for (unsigned int pid : event.pids_on_device)
    if (processes_->belongs(static_cast<pid_t>(pid))) {
      rec.pid = static_cast<pid_t>(pid);
      break;
    }
  if (!rec.pid) {
    for (auto it = tracked_.rbegin(); it != tracked_.rend(); ++it)
      if (it->device == event.device) {
        rec.pid = static_cast<pid_t>(it->pid);
        break;
      }
  }
  if (xids_.size() < kXidKept)
    xids_.push_back(rec);
  else
    ++xids_dropped_;
}

void NvmlProbe::sample(timeline::MemorySample& into) {
  refresh();
  if (gpu_used_ >= 0) into.gpu_used = gpu_used_;
  if (gpu_used_ >= 0 || gpu_device_used_ >= 0) into.gpu_sampled_at_ms = state_.sampled_at_ms;
  if (gpu_device_used_ >= 0) into.gpu_device_used = gpu_device_used_;
  if (gpu_total_ >= 0) into.gpu_total = gpu_total_;
}

void NvmlProbe::on_kernel_exit(const KernelExit& /*how*/) {
  // The processes' last readings stay as they were; only late Xid events are collected. The
  // worker looks for them every 250 ms: asked now, an Xid of the fault that killed the
  // kernel a moment ago (an illegal address, then exit) is in the report.
  if (state_.phase == GpuState::Phase::running) worker_->sample_and_wait(kDeathWait);
  xids_dropped_ += worker_->follow_xid_events(xid_cursor_, incoming_);
  for (const auto& e : incoming_)
    attribute(e);
  incoming_.clear();
}

nlohmann::json NvmlProbe::other_processes() const {
  // Who else held device memory at the last sample: when the kernel ran out, often the
  // answer (another notebook's JAX pre-allocated the device).
  struct Other {
    unsigned int pid;
    unsigned int device;
    std::optional<unsigned long long> used;
  };
  std::vector<Other> others;
  for (const auto& dev : state_.devices)
    for (const auto& p : dev.processes)
      if (!processes_->belongs(static_cast<pid_t>(p.pid)))
        others.push_back({p.pid, dev.index, p.used_memory});
  std::sort(others.begin(), others.end(),
            [](const Other& a, const Other& b) { return a.used.value_or(0) > b.used.value_or(0); });
  if (others.size() > kOtherProcessesReported) others.resize(kOtherProcessesReported);
  auto out = nlohmann::json::array();
  for (const auto& o : others) {
    const auto who = identify_process(static_cast<pid_t>(o.pid));
    out.push_back({{"pid", o.pid},
                   {"device", o.device},
                   {"used_memory", o.used ? nlohmann::json(*o.used) : nlohmann::json(nullptr)},
                   {"command_line", who.command_line},
                   {"frameworks", who.frameworks},
                   {"kernel_id", who.kernel_id.empty() ? nlohmann::json(nullptr)
                                                       : nlohmann::json(who.kernel_id)},
                   {"notebook",
                    who.notebook.empty() ? nlohmann::json(nullptr) : nlohmann::json(who.notebook)},
                   {"watched", who.watched}});
  }
  return out;
}

void NvmlProbe::contribute(nlohmann::json& report) const {
  using nlohmann::json;
  const auto st = status();
  json gpu;
  gpu["available"] = st.available;
  gpu["reason"] = st.reason;
  gpu["driver_version"] =
      state_.driver_version.empty() ? json(nullptr) : json(state_.driver_version);
  auto& devices = gpu["devices"] = json::array();
  for (const auto& d : state_.devices) {
    json dev = {{"index", d.index}, {"name", d.name}, {"uuid", d.uuid}};
    dev["memory_total"] = d.memory ? json(d.memory->total) : json(nullptr);
    dev["memory_used"] = d.memory ? json(d.memory->used) : json(nullptr);
    dev["memory_free"] = d.memory ? json(d.memory->free) : json(nullptr);
    devices.push_back(std::move(dev));
  }
  auto& procs = gpu["processes"] = json::array();
  for (const auto& p : tracked_) {
    procs.push_back({{"pid", p.pid},
                     {"device", p.device},
                     {"used_memory", p.used_memory ? json(*p.used_memory) : json(nullptr)},
                     {"peak_used_memory", p.peak_used_memory},
                     {"last_seen_ms", p.last_seen_ms}});
  }
  auto& xids = gpu["xid_events"] = json::array();
  for (const auto& x : xids_) {
    xids.push_back({{"t_ms", x.t_ms},
                    {"xid", x.xid},
                    {"device", x.device},
                    {"pid", x.pid ? json(*x.pid) : json(nullptr)}});
  }
  gpu["other_processes"] = other_processes();
  gpu["problems"] = state_.problems;
  gpu["failing_since_ms"] =
      state_.failing_since_ms > 0 ? json(state_.failing_since_ms) : json(nullptr);
  gpu["sampled_at_ms"] = state_.sampled_at_ms > 0 ? json(state_.sampled_at_ms) : json(nullptr);
  report["gpu"] = std::move(gpu);
}

}  // namespace kwd::probes::nvml
