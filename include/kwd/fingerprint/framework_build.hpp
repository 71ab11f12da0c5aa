#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "kwd/platform/root_view.hpp"

namespace kwd::fingerprint {

// What a framework was built for, read from the files its package installs, never by
// importing it: {"accelerator": "cpu" | "cuda" | "rocm", "cuda": "12.5.1", "cudnn": "9",
// "hip": "6.0", "summary": "CUDA 12.5.1, cuDNN 9"} (fields it cannot know are left out).
struct FrameworkBuild {
  std::string accelerator;  // cpu | cuda | rocm
  std::string cuda, cudnn, hip;
  [[nodiscard]] std::string summary() const;
  [[nodiscard]] nlohmann::json to_json() const;
};

// tensorflow/python/platform/build_info.py: an OrderedDict of ('is_cuda_build', True),
// ('cuda_version', '12.5.1'), ('cudnn_version', '9')...
std::optional<FrameworkBuild> parse_tensorflow_build_info(std::string_view text);
// torch/version.py: cuda = '12.1' or None, hip = '6.0...' or None.
std::optional<FrameworkBuild> parse_torch_version(std::string_view text);

// The build of framework `name` installed in `package_dir` (its import directory, as the
// kernel names it, read through the kernel's `root`), from the file above; nullopt for a
// framework whose build it cannot read.
std::optional<FrameworkBuild> read_framework_build(const platform::RootView& root,
                                                   const std::string& name,
                                                   const std::filesystem::path& package_dir);

}  // namespace kwd::fingerprint
