#include "kwd/probes/darwin/task_memory_probe.hpp"

#include <libproc.h>
#include <sys/resource.h>

#include <nlohmann/json.hpp>

#include "kwd/util/clock.hpp"

namespace kwd::probes::darwin {

TaskMemoryProbe::TaskMemoryProbe(const ProbeOptions& options)
    : root_(options.kernel_pid),
      processes_(options.processes ? options.processes
                                   : std::make_shared<KernelProcesses>(options.kernel_pid)),
      rescan_interval_ms_(options.tree_rescan_interval.count()) {
  Readings r;
  if (!read(root_, r)) {
    available_ = false;
    reason_ = "proc_pid_rusage(RUSAGE_INFO_V4) refused for pid " + std::to_string(root_);
    return;
  }
  members_.emplace(root_, r);
  reason_ =
      "proc_pid_rusage(RUSAGE_INFO_V4): resident size and phys_footprint every sample; "
      "children by proc_listpids(PROC_PPID_ONLY)";
}

ProbeStatus TaskMemoryProbe::status() const {
  return {"darwin.task_memory", available_, reason_};
}

bool TaskMemoryProbe::read(pid_t pid, Readings& r) {
  rusage_info_v4 info{};
  if (proc_pid_rusage(pid, RUSAGE_INFO_V4, reinterpret_cast<rusage_info_t*>(&info)) != 0)
    return false;
  r.resident = static_cast<std::int64_t>(info.ri_resident_size);
  r.footprint = static_cast<std::int64_t>(info.ri_phys_footprint);
  r.lifetime_max_footprint = static_cast<std::int64_t>(info.ri_lifetime_max_phys_footprint);
  r.peak_resident = std::max(r.peak_resident, r.resident);
  return true;
}

void TaskMemoryProbe::rescan() {
  // Breadth first from every member: each process's direct children.
  std::vector<pid_t> frontier;
  for (const auto& [pid, r] : members_)
    frontier.push_back(pid);
  std::vector<pid_t> buffer(256);
  bool changed = false;
  while (!frontier.empty()) {
    const pid_t parent = frontier.back();
    frontier.pop_back();
    const int bytes = proc_listpids(PROC_PPID_ONLY, static_cast<uint32_t>(parent), buffer.data(),
                                    static_cast<int>(buffer.size() * sizeof(pid_t)));
    if (bytes <= 0) continue;
    const auto count = static_cast<std::size_t>(bytes) / sizeof(pid_t);
    for (std::size_t i = 0; i < count && i < buffer.size(); ++i) {
      const pid_t child = buffer[i];
      if (child <= 0 || members_.contains(child)) continue;
      Readings r;
      if (!read(child, r)) continue;
      members_.emplace(child, r);
      frontier.push_back(child);
      changed = true;
    }
  }
  if (changed) {
    std::vector<pid_t> pids;
    for (const auto& [pid, r] : members_)
      pids.push_back(pid);
    processes_->set_members(std::move(pids));
  }
}

void TaskMemoryProbe::sample(timeline::MemorySample& into) {
  if (!available_) return;
  const std::int64_t now = util::steady_ms();
  if (last_rescan_ms_ < 0 || now - last_rescan_ms_ >= rescan_interval_ms_) {
    last_rescan_ms_ = now;
    rescan();
  }
  std::int64_t resident = 0, footprint = 0;
  for (auto it = members_.begin(); it != members_.end();) {
    if (!read(it->first, it->second)) {
      if (departed_.size() == kDepartedKept) departed_.erase(departed_.begin());
      departed_.emplace_back(it->first, it->second);
      processes_->departed(it->first);
      it = members_.erase(it);
      continue;
    }
    resident += it->second.resident;
    footprint += it->second.footprint;
    ++it;
  }
  if (members_.empty()) return;
  into.rss = resident;
  into.phys_footprint = footprint;
  into.processes = static_cast<std::int64_t>(members_.size());
}

void TaskMemoryProbe::on_kernel_exit(const KernelExit& /*how*/) {
  timeline::MemorySample ignored;
  sample(ignored);  // moves the dead to `departed` with their last readings
}

void TaskMemoryProbe::contribute(nlohmann::json& report) const {
  using nlohmann::json;
  const auto entry = [this](pid_t pid, const Readings& r) {
    return json{{"pid", pid},
                {"rss", r.resident},
                {"peak_rss", r.peak_resident},
                {"phys_footprint", r.footprint},
                {"lifetime_max_phys_footprint", r.lifetime_max_footprint},
                {"is_kernel", pid == root_}};
  };
  auto& tree = report["process_tree"];
  tree["root_pid"] = root_;
  auto& members = tree["members"] = json::array();
  for (const auto& [pid, r] : members_)
    members.push_back(entry(pid, r));
  auto& gone = tree["departed"] = json::array();
  for (const auto& [pid, r] : departed_)
    gone.push_back(entry(pid, r));
}

}  // namespace kwd::probes::darwin
