#include <memory>

#include "kwd/probes/darwin/io_accelerator_probe.hpp"
#include "kwd/probes/darwin/task_memory_probe.hpp"
#include "kwd/probes/darwin/vm_pressure_probe.hpp"
#include "kwd/probes/probe.hpp"

namespace kwd::probes {

ProbeList make_platform_probes(const ProbeOptions& options) {
  ProbeList probes;
  // The tree first: it says who belongs to the kernel.
  probes.push_back(std::make_unique<darwin::TaskMemoryProbe>(options));
  probes.push_back(std::make_unique<darwin::VmPressureProbe>(options));
  probes.push_back(std::make_unique<darwin::IoAcceleratorProbe>(options));
  return probes;
}

}  // namespace kwd::probes
