#include <memory>

#include "kwd/probes/linux/cgroup_probe.hpp"
#include "kwd/probes/linux/oom_killer_probe.hpp"
#include "kwd/probes/linux/process_tree_probe.hpp"
#include "kwd/probes/linux/system_memory_probe.hpp"
#include "kwd/probes/probe.hpp"

namespace kwd::probes {

ProbeList make_platform_probes(const ProbeOptions& options) {
  ProbeList probes;
  // Order matters: the tree first (it says who belongs to the kernel), the cgroup before the
  // OOM-killer probe (which reads the cgroup's counter from the report).
  probes.push_back(std::make_unique<linux_proc::ProcessTreeProbe>(options));
  probes.push_back(std::make_unique<linux_proc::CgroupProbe>(options));
  probes.push_back(std::make_unique<linux_proc::SystemMemoryProbe>(options));
  probes.push_back(std::make_unique<linux_proc::OomKillerProbe>(options));
  return probes;
}

}  // namespace kwd::probes
