#include "kwd/probes/probe.hpp"

#include <nlohmann/json.hpp>

namespace kwd::probes {

void Probe::contribute(nlohmann::json& /*report*/) const {}

ProbeList make_probes(ProbeOptions options) {
  if (!options.processes) options.processes = std::make_shared<KernelProcesses>(options.kernel_pid);
  return make_platform_probes(options);
}

}  // namespace kwd::probes
