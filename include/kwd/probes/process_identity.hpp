#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace kwd::probes {

// Who a process that is not the kernel's is, for a report that names it: what it runs and
// which GPU frameworks it has loaded (their remedies differ: JAX pre-allocates, TensorFlow
// maps the whole device, PyTorch caches). Platform folders implement it; fields it cannot
// read stay empty.
struct ProcessIdentity {
  std::string command_line;             // shortened, control characters replaced
  std::vector<std::string> frameworks;  // "jax", "tensorflow", "torch", "cupy"
};

ProcessIdentity identify_process(pid_t pid);

}  // namespace kwd::probes
