#include "kwd/probes/probe.hpp"

#include <nlohmann/json.hpp>

#include "kwd/probes/nvml/nvml_probe.hpp"

namespace kwd::probes {

void Probe::contribute(nlohmann::json& /*report*/) const {}

ProbeList make_probes(ProbeOptions options) {
  if (!options.processes) options.processes = std::make_shared<KernelProcesses>(options.kernel_pid);
  ProbeList probes = make_platform_probes(options);
#if !defined(__APPLE__)
  // NVIDIA ships no NVML for macOS; everywhere else a missing driver is a reported state.
  probes.push_back(std::make_unique<nvml::NvmlProbe>(options));
#endif
  return probes;
}

}  // namespace kwd::probes
