#include "kwd/fingerprint/library_catalog.hpp"

#include <array>
#include <map>
#include <regex>

namespace kwd::fingerprint {
namespace {

struct LibraryPattern {
  const char* pattern;  // matched against the file name
  const char* name;
  int version_group;  // sub-match holding a version, 0 for none
};

// Frameworks by the import name they are installed under.
const std::map<std::string, std::string>& frameworks() {
  static const std::map<std::string, std::string> names{
      {"tensorflow", "tensorflow"},
      {"tensorflow-plugins", "tensorflow-metal"},
      {"torch", "torch"},
      {"torchvision", "torchvision"},
      {"torchaudio", "torchaudio"},
      {"jaxlib", "jaxlib"},
      {"jax", "jax"},
      {"cupy", "cupy"},
      {"cupy_backends", "cupy"},
      {"numpy", "numpy"},
      {"mlx", "mlx"},
      {"scipy", "scipy"},
      {"sklearn", "scikit-learn"},
      {"pandas", "pandas"},
      {"xgboost", "xgboost"},
      {"lightgbm", "lightgbm"},
      {"onnxruntime", "onnxruntime"},
      {"triton", "triton"},
      {"tensorrt", "tensorrt"},
      {"paddle", "paddlepaddle"},
      {"mxnet", "mxnet"},
      {"pyarrow", "pyarrow"},
      {"polars", "polars"},
      {"numba", "numba"},
      {"llvmlite", "llvmlite"},
      {"keras", "keras"},
  };
  return names;
}

const std::array<LibraryPattern, 24>& libraries() {
  static const std::array<LibraryPattern, 24> patterns{{
      {R"(^libcudart\.so(\.([0-9.]+))?$)", "libcudart", 2},
      {R"(^libcuda\.so(\.([0-9.]+))?$)", "libcuda", 2},
      {R"(^libcudnn(_[a-z_]+)?\.so(\.([0-9.]+))?$)", "cuDNN", 3},
      {R"(^libcublas(Lt)?\.so(\.([0-9.]+))?$)", "cuBLAS", 3},
      {R"(^libcufft\.so(\.([0-9.]+))?$)", "cuFFT", 2},
      {R"(^libcusolver\.so(\.([0-9.]+))?$)", "cuSOLVER", 2},
      {R"(^libcusparse\.so(\.([0-9.]+))?$)", "cuSPARSE", 2},
      {R"(^libcurand\.so(\.([0-9.]+))?$)", "cuRAND", 2},
      {R"(^libnvrtc\.so(\.([0-9.]+))?$)", "NVRTC", 2},
      {R"(^libnccl\.so(\.([0-9.]+))?$)", "NCCL", 2},
      {R"(^libnvidia-ml\.so(\.([0-9.]+))?$)", "NVML", 2},
      {R"(^libtensorflow_framework\.(so|dylib)(\.([0-9.]+))?$)", "libtensorflow_framework", 3},
      {R"(^libtorch_cuda\.(so|dylib)$)", "libtorch_cuda", 0},
      {R"(^libtorch_cpu\.(so|dylib)$)", "libtorch_cpu", 0},
      {R"(^libmkl_core\.(so|dylib)(\.([0-9.]+))?$)", "Intel MKL", 3},
      {R"(^libiomp5(-[0-9a-f]+)?\.(so|dylib)$)", "Intel OpenMP (libiomp5)", 0},
      {R"(^libomp(-[0-9a-f]+)?\.(so|dylib)(\.[0-9.]+)?$)", "LLVM OpenMP (libomp)", 0},
      {R"(^libgomp(-[0-9a-f]+)?\.so(\.([0-9.]+))?$)", "GNU OpenMP (libgomp)", 3},
      {R"(^libopenblas.*\.(so|dylib)(\.([0-9.]+))?$)", "OpenBLAS", 0},
      {R"(^libmetal_plugin\.(dylib|so)$)", "tensorflow-metal plugin", 0},
      {R"(^(Metal|MetalPerformanceShaders|MetalPerformanceShadersGraph)$)", "Metal", 0},
      {R"(^libamdhip64\.so(\.([0-9.]+))?$)", "ROCm HIP", 2},
      {R"(^libpython3\.[0-9]+[a-z]*\.(so|dylib)(\.[0-9.]+)?$)", "libpython", 0},
      {R"(^libstdc\+\+\.so\.([0-9.]+)$)", "libstdc++", 1},
  }};
  return patterns;
}

}  // namespace

std::optional<KnownFile> classify_framework(const std::string& top_level) {
  std::string module = top_level.substr(0, top_level.find('.'));
  const auto& names = frameworks();
  if (auto it = names.find(module); it != names.end())
    return KnownFile{KnownFile::Kind::kFramework, it->second, ""};
  return std::nullopt;
}

std::optional<KnownFile> classify_library(const std::string& path) {
  static const auto compiled = [] {
    std::vector<std::regex> out;
    for (const auto& p : libraries())
      out.emplace_back(p.pattern, std::regex::ECMAScript);
    return out;
  }();
  const auto slash = path.rfind('/');
  const std::string file = slash == std::string::npos ? path : path.substr(slash + 1);
  for (std::size_t i = 0; i < compiled.size(); ++i) {
    std::smatch m;
    if (!std::regex_match(file, m, compiled[i])) continue;
    const auto& p = libraries()[i];
    KnownFile known{KnownFile::Kind::kNativeLibrary, p.name, ""};
    if (p.version_group > 0 && m[p.version_group].matched) known.version = m[p.version_group].str();
    return known;
  }
  return std::nullopt;
}

}  // namespace kwd::fingerprint
