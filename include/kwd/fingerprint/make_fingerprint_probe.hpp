#pragma once

#include <sys/types.h>

#include <memory>

#include "kwd/probes/probe.hpp"

namespace kwd::fingerprint {

// The probe that fills the report's `fingerprint` section for this platform (one folder each
// under src/fingerprint/): what the kernel has loaded, with versions.
std::unique_ptr<probes::Probe> make_fingerprint_probe(pid_t pid);

}  // namespace kwd::fingerprint
