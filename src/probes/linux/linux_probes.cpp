#include <memory>

#include "kwd/probes/drm/drm_probe.hpp"
#include "kwd/probes/linux/cgroup_probe.hpp"
#include "kwd/probes/linux/oom_killer_probe.hpp"
#include "kwd/probes/linux/process_tree_probe.hpp"
#include "kwd/probes/linux/shared_memory_probe.hpp"
#include "kwd/probes/linux/system_memory_probe.hpp"
#include "kwd/probes/nvml/nvml_probe.hpp"
#include "kwd/probes/probe.hpp"

namespace kwd::probes {

ProbeList make_platform_probes(const ProbeOptions& options) {
  ProbeList probes;
  // The tree first: it says who belongs to the kernel, and the others read that.
  probes.push_back(std::make_unique<linux_proc::ProcessTreeProbe>(options));
  probes.push_back(std::make_unique<linux_proc::CgroupProbe>(options));
  probes.push_back(std::make_unique<linux_proc::SystemMemoryProbe>(options));
  probes.push_back(std::make_unique<linux_proc::OomKillerProbe>(options));
  probes.push_back(std::make_unique<linux_proc::SharedMemoryProbe>(options));
  // NVIDIA ships no NVML for macOS; here a missing driver is a reported state.
  probes.push_back(std::make_unique<nvml::NvmlProbe>(options));
  // AMD and Intel GPUs, after NVML: their memory joins NVIDIA's in the samples.
  probes.push_back(std::make_unique<drm::DrmProbe>(options));
  return probes;
}

}  // namespace kwd::probes
