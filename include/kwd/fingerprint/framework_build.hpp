#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "kwd/platform/root_view.hpp"

namespace kwd::fingerprint {

// What a framework was built for, read from the files its package installs, never by
// importing it: {"accelerator": "cpu" | "cuda" | "rocm" | "xpu", "cuda": "12.5.1", "cudnn": "9",
// "hip": "6.0", "rocm": "6.3", "xpu": "2025.2", "summary": "CUDA 12.5.1, cuDNN 9"} (fields it
// cannot know are left out).
struct FrameworkBuild {
  std::string accelerator;  // cpu | cuda | rocm | xpu
  std::string cuda, cudnn, hip;
  std::string rocm;  // torch's `rocm` (2.9 on), else its local version's: "+rocm6.3" -> "6.3"
  std::string xpu;   // torch's `xpu` (the oneAPI it was built with); XPU builds are "+xpu"
  [[nodiscard]] std::string summary() const;
  [[nodiscard]] nlohmann::json to_json() const;
};

// tensorflow/python/platform/build_info.py: an OrderedDict of ('is_cuda_build', True),
// ('cuda_version', '12.5.1'), ('cudnn_version', '9')...
std::optional<FrameworkBuild> parse_tensorflow_build_info(std::string_view text);
// torch/version.py: __version__ = '2.7.1+rocm6.3' (the local version names the wheel's
// flavour: +cu124, +rocm6.3, +xpu, +cpu), cuda = '12.1' or None, hip = '6.0...' or None, and
// in newer builds rocm and xpu.
std::optional<FrameworkBuild> parse_torch_version(std::string_view text);

// The build of framework `name` installed in `package_dir` (its import directory, as the
// kernel names it, read through the kernel's `root`), from the file above; nullopt for a
// framework whose build it cannot read.
std::optional<FrameworkBuild> read_framework_build(const platform::RootView& root,
                                                   const std::string& name,
                                                   const std::filesystem::path& package_dir);

}  // namespace kwd::fingerprint
