#include <memory>

#include "kwd/probes/linux/process_tree_probe.hpp"
#include "kwd/probes/probe.hpp"

namespace kwd::probes {

ProbeList make_platform_probes(const ProbeOptions& options) {
  ProbeList probes;
  probes.push_back(std::make_unique<linux_proc::ProcessTreeProbe>(options));
  return probes;
}

}  // namespace kwd::probes
