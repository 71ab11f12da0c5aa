#include "kwd/probes/probe.hpp"

#include <nlohmann/json.hpp>

namespace kwd::probes {

void Probe::contribute(nlohmann::json& /*report*/) const {}

ProbeList make_probes(const ProbeOptions& options) {
  return make_platform_probes(options);
}

}  // namespace kwd::probes
