#include "kwd/fingerprint/framework_build.hpp"

#include <regex>
#include <sstream>

namespace kwd::fingerprint {
namespace {

constexpr std::size_t kSmallText = 64 * 1024;

// The value of a ('key', value) pair of build_info.py, unquoted; "" when absent.
std::string pair_value(const std::string& text, const std::string& key) {
  const std::regex pair("\\('" + key + "',\\s*'?([^')]*)'?\\)");
  std::smatch m;
  return std::regex_search(text, m, pair) ? m[1].str() : "";
}

// The value of `name = '...'` (or `name: Optional[str] = '...'`) of version.py; "" for None.
std::string assignment(const std::string& text, const std::string& name) {
  const std::regex line("(^|\\n)" + name + "\\s*(:[^=\\n]*)?=\\s*'([^']*)'");
  std::smatch m;
  return std::regex_search(text, m, line) ? m[3].str() : "";
}

}  // namespace

std::string FrameworkBuild::summary() const {
  if (accelerator == "cuda") {
    std::string s = "CUDA" + (cuda.empty() ? "" : " " + cuda);
    if (!cudnn.empty()) s += ", cuDNN " + cudnn;
    return s;
  }
  if (accelerator == "rocm")
    return "ROCm" + (rocm.empty() ? "" : " " + rocm) + (hip.empty() ? "" : " (HIP " + hip + ")");
  if (accelerator == "xpu") return "XPU" + (xpu.empty() ? "" : " (oneAPI " + xpu + ")");
  return "CPU only";
}

nlohmann::json FrameworkBuild::to_json() const {
  nlohmann::json j = {{"accelerator", accelerator}, {"summary", summary()}};
  if (!cuda.empty()) j["cuda"] = cuda;
  if (!cudnn.empty()) j["cudnn"] = cudnn;
  if (!hip.empty()) j["hip"] = hip;
  if (!rocm.empty()) j["rocm"] = rocm;
  if (!xpu.empty()) j["xpu"] = xpu;
  return j;
}

std::optional<FrameworkBuild> parse_tensorflow_build_info(std::string_view view) {
  const std::string text(view);
  if (text.find("build_info") == std::string::npos) return std::nullopt;
  FrameworkBuild b;
  b.accelerator = pair_value(text, "is_cuda_build") == "True"   ? "cuda"
                  : pair_value(text, "is_rocm_build") == "True" ? "rocm"
                                                                : "cpu";
  b.cuda = pair_value(text, "cuda_version");
  b.cudnn = pair_value(text, "cudnn_version");
  return b;
}

std::optional<FrameworkBuild> parse_torch_version(std::string_view view) {
  const std::string text(view);
  if (text.find("__version__") == std::string::npos) return std::nullopt;
  FrameworkBuild b;
  b.cuda = assignment(text, "cuda");
  b.hip = assignment(text, "hip");
  b.rocm = assignment(text, "rocm");
  b.xpu = assignment(text, "xpu");
  // The local version says which wheel this is even where the fields do not (a ROCm wheel
  // without `rocm`, an XPU one whose `xpu` is None).
  const std::string version = assignment(text, "__version__");
  const auto plus = version.find('+');
  const std::string local = plus == std::string::npos ? "" : version.substr(plus + 1);
  if (b.rocm.empty() && local.starts_with("rocm")) b.rocm = local.substr(4);
  const bool xpu_wheel = local == "xpu" || local.starts_with("xpu");
  b.accelerator = !b.cuda.empty()                     ? "cuda"
                  : !b.hip.empty() || !b.rocm.empty() ? "rocm"
                  : !b.xpu.empty() || xpu_wheel       ? "xpu"
                                                      : "cpu";
  return b;
}

std::optional<FrameworkBuild> read_framework_build(const platform::RootView& root,
                                                   const std::string& name,
                                                   const std::filesystem::path& package_dir) {
  if (name == "tensorflow") {
    if (auto text =
            root.read((package_dir / "python" / "platform" / "build_info.py").string(), kSmallText))
      return parse_tensorflow_build_info(*text);
  } else if (name == "torch") {
    if (auto text = root.read((package_dir / "version.py").string(), kSmallText))
      return parse_torch_version(*text);
  } else if (name == "jaxlib") {
    // jaxlib itself is the CPU build; CUDA comes as plugin packages installed beside it.
    const auto site = package_dir.parent_path();
    const auto there = root.stat(site.string());
    if (!there || !there->directory) return std::nullopt;
    for (const auto& dir : root.list(site.string())) {
      static const std::regex plugin(R"(^jax_cuda([0-9]+)_plugin$)");
      std::smatch m;
      if (std::regex_match(dir, m, plugin))
        return FrameworkBuild{"cuda", m[1].str(), "", "", "", ""};
    }
    return FrameworkBuild{"cpu", "", "", "", "", ""};
  }
  return std::nullopt;
}

}  // namespace kwd::fingerprint
