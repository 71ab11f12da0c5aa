#pragma once

#include <map>
#include <string>
#include <string_view>

namespace kwd::fingerprint {

// The environment variables that shape how ML frameworks use memory, GPUs and threads,
// from a NUL-separated /proc/PID/environ text. Only allow-listed names are kept (TF_*,
// CUDA_*, PYTORCH_*, XLA_*, JAX_*, OMP_*, ...), never anything that looks like a secret
// (a name containing TOKEN, SECRET, PASSWORD, KEY, CREDENTIAL, AUTH), and values are
// shortened.
std::map<std::string, std::string> allowed_environment(std::string_view environ_text);
bool is_allowed_variable(std::string_view name);

}  // namespace kwd::fingerprint
