#include "kwd/fingerprint/environment_filter.hpp"

#include <algorithm>
#include <array>
#include <cctype>

namespace kwd::fingerprint {
namespace {

// Families of variables that change how frameworks use memory, devices and threads.
constexpr std::array<std::string_view, 26> kPrefixes{
    "TF_",      "TENSORFLOW_", "CUDA_",  "CUDNN_", "CUBLAS_",   "NCCL_",  "NVIDIA_",
    "PYTORCH_", "TORCH_",      "XLA_",   "JAX_",   "MPS_",      "METAL_", "MTL_",
    "MLX_",     "OMP_",        "KMP_",   "MKL_",   "OPENBLAS_", "GOTO_",  "HIP_",
    "ROCM_",    "HSA_",        "KERAS_", "NUMBA_", "MALLOC_"};
// Single variables with the same kind of effect.
constexpr std::array<std::string_view, 8> kNames{
    "PYTHONFAULTHANDLER", "PYTHONMALLOC",    "PYTHONDEVMODE",     "PYTHONTRACEMALLOC",
    "LD_PRELOAD",         "LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH", "JPY_SESSION_NAME"};
// Never copied, whatever the prefix: these name credentials.
constexpr std::array<std::string_view, 9> kSecretWords{
    "TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL", "AUTH", "COOKIE", "SESSION_ID"};
// Terraform shares the TF_ prefix with TensorFlow; its variables (TF_VAR_* inputs can hold
// credentials) are none of our business.
constexpr std::array<std::string_view, 12> kForeignPrefixes{"TF_VAR_",
                                                            "TF_CLI_",
                                                            "TF_LOG",
                                                            "TF_INPUT",
                                                            "TF_WORKSPACE",
                                                            "TF_IN_AUTOMATION",
                                                            "TF_PLUGIN_",
                                                            "TF_REGISTRY_",
                                                            "TF_TOKEN_",
                                                            "TF_STATE_",
                                                            "TF_APPEND_USER_AGENT",
                                                            "TF_DATA_DIR"};
constexpr std::size_t kMaxValue = 512;

}  // namespace

bool is_allowed_variable(std::string_view name) {
  if (name.empty()) return false;
  std::string upper(name);
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  for (auto word : kSecretWords)
    if (upper.find(word) != std::string::npos) return false;
  if (std::any_of(kForeignPrefixes.begin(), kForeignPrefixes.end(),
                  [&](std::string_view p) { return name.starts_with(p); }))
    return false;
  if (std::find(kNames.begin(), kNames.end(), name) != kNames.end()) return true;
  return std::any_of(kPrefixes.begin(), kPrefixes.end(),
                     [&](std::string_view p) { return name.starts_with(p); });
}

std::map<std::string, std::string> allowed_environment(std::string_view environ_text) {
  std::map<std::string, std::string> out;
  bool faulthandler_is_ours = false;
  std::size_t start = 0;
  while (start < environ_text.size()) {
    auto end = environ_text.find('\0', start);
    if (end == std::string_view::npos) end = environ_text.size();
    const std::string_view entry = environ_text.substr(start, end - start);
    start = end + 1;
    const auto eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view name = entry.substr(0, eq);
    if (entry == "KERNEL_WATCHDOG_FAULTHANDLER_ADDED=1") faulthandler_is_ours = true;
    if (!is_allowed_variable(name)) continue;
    std::string value(entry.substr(eq + 1));
    // A URL with credentials in it ("https://user:pw@host") is a secret too.
    if (value.find("://") != std::string::npos && value.find('@') != std::string::npos) continue;
    if (value.size() > kMaxValue) value = value.substr(0, kMaxValue) + "…";
    out.emplace(std::string(name), std::move(value));
  }
  // The watchdog set it, not the user (see faulthandler::PythonShim::apply).
  if (faulthandler_is_ours) out.erase("PYTHONFAULTHANDLER");
  return out;
}

}  // namespace kwd::fingerprint
