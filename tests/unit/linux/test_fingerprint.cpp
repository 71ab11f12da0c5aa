#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kwd/fingerprint/compatibility.hpp"
#include "kwd/fingerprint/environment_filter.hpp"
#include "kwd/fingerprint/framework_build.hpp"
#include "kwd/fingerprint/library_catalog.hpp"
#include "kwd/fingerprint/linux/fingerprint_probe.hpp"
#include "kwd/fingerprint/loaded_files.hpp"
#include "kwd/fingerprint/package_metadata.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using kwd::test::write_file;
using namespace kwd::fingerprint;
using nlohmann::json;

namespace {

// A site-packages directory laid out as pip and Debian lay them out.
struct FakeSite {
  fs::path root = fs::temp_directory_path() / ("kwd-fp-" + std::to_string(::getpid()));
  fs::path site = root / "venv/lib/python3.11/site-packages";
  FakeSite() {
    fs::remove_all(root);
    write_file(site / "tensorflow/python/_pywrap_tensorflow_internal.so", "");
    write_file(site / "tensorflow/libtensorflow_framework.so.2", "");
    write_file(site / "tensorflow-2.18.0.dist-info/METADATA",
               "Metadata-Version: 2.1\nName: tensorflow\nVersion: 2.18.0\n\nName: not-this\n");
    write_file(site / "tensorflow-2.18.0.dist-info/top_level.txt", "tensorflow\n");
    write_file(site / "tensorflow-plugins/libmetal_plugin.so", "");
    write_file(site / "tensorflow_metal-1.1.0.dist-info/METADATA",
               "Metadata-Version: 2.1\nName: tensorflow-metal\nVersion: 1.1.0\n");
    write_file(site / "numpy/core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so", "");
    write_file(site / "numpy-1.24.2.egg-info/PKG-INFO",
               "Metadata-Version: 2.1\nName: numpy\nVersion: 1.24.2\n");
    write_file(site / "numpy-1.24.2.egg-info/top_level.txt", "numpy\n");
    write_file(site / "nvidia/cudnn/lib/libcudnn.so.9", "");
    write_file(site / "nvidia/cublas/lib/libcublas.so.12", "");
    write_file(site / "nvidia_cudnn_cu12-9.1.0.70.dist-info/METADATA",
               "Name: nvidia-cudnn-cu12\nVersion: 9.1.0.70\n");
    write_file(site / "nvidia_cudnn_cu12-9.1.0.70.dist-info/top_level.txt", "nvidia\n");
    write_file(site / "nvidia_cudnn_cu12-9.1.0.70.dist-info/RECORD",
               "nvidia/cudnn/lib/libcudnn.so.9,sha256=abc,123\n");
    write_file(site / "nvidia_cublas_cu12-12.4.5.8.dist-info/METADATA",
               "Name: nvidia-cublas-cu12\nVersion: 12.4.5.8\n");
    write_file(site / "nvidia_cublas_cu12-12.4.5.8.dist-info/top_level.txt", "nvidia\n");
    write_file(site / "nvidia_cublas_cu12-12.4.5.8.dist-info/RECORD",
               "nvidia/cublas/lib/libcublas.so.12,sha256=def,456\n");
    write_file(site / "simplejson.egg-info", "Name: simplejson\nVersion: 3.19\n");
    write_file(site / "simplejson/_speedups.cpython-311-x86_64-linux-gnu.so", "");
  }
  ~FakeSite() { fs::remove_all(root); }
  [[nodiscard]] std::string at(const std::string& rel) const { return (site / rel).string(); }
};

std::string maps_line(const std::string& path) {
  return "7f0000000000-7f0000001000 r-xp 00000000 08:01 1234          " + path + "\n";
}

}  // namespace

TEST_CASE("mapped_files keeps file paths only, once each", "[fingerprint]") {
  const std::string maps =
      "55d0 r--p 00000000 08:01 42   /usr/bin/python3.11\n"
      "55d1 r-xp 00001000 08:01 42   /usr/bin/python3.11\n"
      "7f00 rw-p 00000000 00:00 0 \n"
      "7f01 rw-p 00000000 00:00 0    [heap]\n"
      "7f02 r-xp 00000000 08:01 77   /opt/my libs/libx.so (deleted)\n"
      "7ffd r-xp 00000000 00:00 0    [vdso]\n";
  const auto files = mapped_files(maps);
  REQUIRE(files.size() == 2);
  CHECK(files[0] == "/opt/my libs/libx.so");
  CHECK(files[1] == "/usr/bin/python3.11");
}

TEST_CASE("PackageIndex finds the distribution that installed a file", "[fingerprint]") {
  FakeSite fake;
  PackageIndex index;
  auto tf = index.owner_of(fake.at("tensorflow/python/_pywrap_tensorflow_internal.so"));
  REQUIRE(tf);
  CHECK(tf->name == "tensorflow");
  CHECK(tf->version == "2.18.0");
  auto np = index.owner_of(fake.at("numpy/core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so"));
  REQUIRE(np);
  CHECK(np->version == "1.24.2");
  // A shared namespace: RECORD says which wheel put the file there.
  auto cudnn = index.owner_of(fake.at("nvidia/cudnn/lib/libcudnn.so.9"));
  REQUIRE(cudnn);
  CHECK(cudnn->name == "nvidia-cudnn-cu12");
  auto cublas = index.owner_of(fake.at("nvidia/cublas/lib/libcublas.so.12"));
  REQUIRE(cublas);
  CHECK(cublas->version == "12.4.5.8");
  auto simple = index.owner_of(fake.at("simplejson/_speedups.cpython-311-x86_64-linux-gnu.so"));
  REQUIRE(simple);
  CHECK(simple->version == "3.19");
  // Not importable, so not claimed by top_level: found by name instead.
  CHECK_FALSE(index.owner_of(fake.at("tensorflow-plugins/libmetal_plugin.so")));
  auto metal = index.find(fake.at("tensorflow-plugins/libmetal_plugin.so"), "tensorflow_metal");
  REQUIRE(metal);
  CHECK(metal->version == "1.1.0");
  CHECK_FALSE(index.owner_of("/usr/lib/x86_64-linux-gnu/libc.so.6"));
  CHECK(PackageIndex::normalise("Tensorflow_Metal.x") == "tensorflow-metal-x");
}

TEST_CASE("native libraries are named, with the version their file name carries", "[fingerprint]") {
  auto lib = classify_library("/usr/local/cuda/lib64/libcudart.so.12.2.140");
  REQUIRE(lib);
  CHECK(lib->name == "libcudart");
  CHECK(lib->version == "12.2.140");
  CHECK(classify_library("/x/libcudnn_ops_infer.so.8")->name == "cuDNN");
  CHECK(classify_library("/x/libcudnn_ops_infer.so.8")->version == "8");
  CHECK(classify_library("/x/libcublasLt.so.12")->name == "cuBLAS");
  CHECK(classify_library("/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05")->version ==
        "535.104.05");
  CHECK(classify_library("/x/torch/lib/libgomp-a34b3233.so.1")->name == "GNU OpenMP (libgomp)");
  CHECK(classify_library("/x/libiomp5.dylib")->name == "Intel OpenMP (libiomp5)");
  CHECK(classify_library("/x/tensorflow-plugins/libmetal_plugin.dylib")->name ==
        "tensorflow-metal plugin");
  CHECK_FALSE(classify_library("/usr/lib/x86_64-linux-gnu/libz.so.1"));
  CHECK(classify_framework("torch")->name == "torch");
  CHECK(classify_framework("tensorflow-plugins")->name == "tensorflow-metal");
  CHECK_FALSE(classify_framework("requests"));
}

TEST_CASE("only allow-listed, non-secret environment variables are kept", "[fingerprint]") {
  using namespace std::string_literals;
  const std::string environ_text =
      "HOME=/root\0TF_FORCE_GPU_ALLOW_GROWTH=true\0CUDA_VISIBLE_DEVICES=0,1\0"
      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\0AWS_SECRET_ACCESS_KEY=abc\0"
      "HF_TOKEN=hf_x\0TF_VAR_db_password=hunter2\0TF_VAR_region=eu\0OMP_NUM_THREADS=4\0"
      "CUDA_API_KEY=zzz\0XLA_FLAGS=--xla_dump_to=https://u:p@host/x\0"
      "PYTHONFAULTHANDLER=1\0KERNEL_WATCHDOG_FAULTHANDLER_ADDED=1\0PATH=/usr/bin\0"s;
  const auto env = allowed_environment(environ_text);
  CHECK(env.at("TF_FORCE_GPU_ALLOW_GROWTH") == "true");
  CHECK(env.at("CUDA_VISIBLE_DEVICES") == "0,1");
  CHECK(env.at("PYTORCH_CUDA_ALLOC_CONF") == "expandable_segments:True");
  CHECK(env.at("OMP_NUM_THREADS") == "4");
  for (const char* hidden : {"HOME", "AWS_SECRET_ACCESS_KEY", "HF_TOKEN", "TF_VAR_db_password",
                             "TF_VAR_region", "CUDA_API_KEY", "XLA_FLAGS", "PATH",
                             "PYTHONFAULTHANDLER", "KERNEL_WATCHDOG_FAULTHANDLER_ADDED"}) {
    INFO(hidden);
    CHECK_FALSE(env.contains(hidden));
  }
  // The user's own PYTHONFAULTHANDLER is kept.
  CHECK(allowed_environment("PYTHONFAULTHANDLER=1\0"s).contains("PYTHONFAULTHANDLER"));
}

TEST_CASE("versions compare numerically and known-bad combinations are flagged", "[fingerprint]") {
  CHECK(compare_versions("2.9.0", "2.18") < 0);
  CHECK(compare_versions("2.18.0rc1", "2.18") == 0);
  CHECK(compare_versions("1.1", "1.1.0") == 0);
  CHECK(compare_versions("10", "9.9") > 0);

  auto found =
      find_incompatibilities({{"tensorflow", "2.18.0"}, {"tensorflow-metal", "1.1.0"}}, {});
  REQUIRE(found.size() == 1);
  CHECK(found[0]["id"] == "tensorflow-metal-1.1-with-tensorflow-2.18");
  CHECK(found[0]["found"] == "tensorflow-metal 1.1.0, tensorflow 2.18.0");
  CHECK(find_incompatibilities({{"tensorflow", "2.17.1"}, {"tensorflow-metal", "1.1.0"}}, {})
            .empty());
  CHECK(find_incompatibilities({{"tensorflow-macos", "2.19"}, {"tensorflow_metal", "1.1.0"}}, {})
            .size() == 1);
  auto numpy = find_incompatibilities({{"numpy", "2.0.1"}, {"tensorflow", "2.15.0"}}, {});
  REQUIRE(numpy.size() == 1);
  CHECK(numpy[0]["id"] == "numpy-2-with-tensorflow-before-2.18");
  CHECK(find_incompatibilities({{"numpy", "1.26.4"}, {"tensorflow", "2.15.0"}}, {}).empty());
  auto omp = find_incompatibilities({}, {"Intel OpenMP (libiomp5)", "LLVM OpenMP (libomp)"});
  REQUIRE(omp.size() == 1);
  CHECK(omp[0]["id"] == "openmp-duplicate-runtime");
  CHECK(find_incompatibilities({}, {"GNU OpenMP (libgomp)", "LLVM OpenMP (libomp)"}).empty());
}

TEST_CASE("the fingerprint probe reads a process's maps, metadata and environment",
          "[fingerprint]") {
  using namespace std::string_literals;
  FakeSite fake;
  const fs::path proc = fake.root / "proc";
  const fs::path pid_dir = proc / "4242";
  fs::create_directories(pid_dir);
  write_file(
      pid_dir / "maps",
      maps_line("/usr/bin/python3.11") +
          maps_line(fake.at("numpy/core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so")));
  std::ofstream(pid_dir / "environ") << "TF_CPP_MIN_LOG_LEVEL=2\0SECRET_TOKEN=x\0"s;
  fs::create_symlink("/usr/bin/python3.11", pid_dir / "exe");

  FingerprintProbe probe(4242, std::chrono::milliseconds(2000), proc.string());
  probe.refresh(std::chrono::seconds(10));
  json fp = probe.fingerprint();
  REQUIRE(fp["frameworks"].size() == 1);
  CHECK(fp["frameworks"][0]["name"] == "numpy");
  CHECK(fp["frameworks"][0]["version"] == "1.24.2");
  CHECK(fp["python"]["executable"] == "/usr/bin/python3.11");
  CHECK(fp["python"]["version"] == "3.11");
  CHECK(fp["environment"] == json{{"TF_CPP_MIN_LOG_LEVEL", "2"}});
  CHECK(fp["incompatibilities"].empty());
  CHECK(probe.rebuilds() == 1);
  probe.refresh(std::chrono::seconds(10));
  CHECK(probe.rebuilds() == 1);  // nothing new was mapped: nothing looked up again

  // The kernel imports TensorFlow and its Metal plugin, and loads cuDNN from a pip wheel.
  std::ofstream(pid_dir / "maps", std::ios::app)
      << maps_line(fake.at("tensorflow/python/_pywrap_tensorflow_internal.so"))
      << maps_line(fake.at("tensorflow/libtensorflow_framework.so.2"))
      << maps_line(fake.at("tensorflow-plugins/libmetal_plugin.so"))
      << maps_line(fake.at("nvidia/cudnn/lib/libcudnn.so.9"));
  probe.refresh(std::chrono::seconds(10));
  CHECK(probe.rebuilds() == 2);
  fp = probe.fingerprint();
  std::map<std::string, std::string> versions;
  for (const auto& f : fp["frameworks"])
    versions[f["name"]] = f["version"];
  CHECK(versions == std::map<std::string, std::string>{{"numpy", "1.24.2"},
                                                       {"tensorflow", "2.18.0"},
                                                       {"tensorflow-metal", "1.1.0"}});
  bool cudnn = false;
  for (const auto& lib : fp["native_libraries"])
    if (lib["name"] == "cuDNN") {
      cudnn = true;
      CHECK(lib["version"] == "9");
      CHECK(lib["distribution"] == "nvidia-cudnn-cu12");
    }
  CHECK(cudnn);
  REQUIRE(fp["incompatibilities"].size() == 1);
  CHECK(fp["incompatibilities"][0]["id"] == "tensorflow-metal-1.1-with-tensorflow-2.18");

  json report = json::object();
  probe.contribute(report);
  CHECK(report["fingerprint"]["available"] == true);
  CHECK(report["fingerprint"]["frameworks"].size() == 3);
}

TEST_CASE("a process whose maps cannot be read gives an honest empty fingerprint",
          "[fingerprint]") {
  FingerprintProbe probe(999999, std::chrono::milliseconds(2000), "/nonexistent-proc");
  probe.refresh(std::chrono::seconds(10));
  CHECK_FALSE(probe.status().available);
  json report = json::object();
  probe.contribute(report);
  CHECK(report["fingerprint"]["available"] == false);
  CHECK_THAT(report["fingerprint"]["reason"].get<std::string>(), Catch::Contains("maps"));
}

TEST_CASE("metadata directory names give name and version without reading files", "[fingerprint]") {
  using P = std::pair<std::string, std::string>;
  CHECK(parse_metadata_dir_name("tensorflow_metal-1.1.0.dist-info") ==
        P{"tensorflow_metal", "1.1.0"});
  CHECK(parse_metadata_dir_name("numpy-1.24.2.egg-info") == P{"numpy", "1.24.2"});
  CHECK(parse_metadata_dir_name("cupshelpers-1.0-py3.10.egg-info") == P{"cupshelpers", "1.0"});
  CHECK(parse_metadata_dir_name("cryptography.egg-info") == P{"cryptography", ""});
  CHECK_FALSE(parse_metadata_dir_name("numpy"));
  CHECK_FALSE(parse_metadata_dir_name(".dist-info"));
}

TEST_CASE("framework builds are read from the packages' own files", "[fingerprint]") {
  using kwd::fingerprint::parse_tensorflow_build_info;
  using kwd::fingerprint::parse_torch_version;
  // tensorflow-cpu 2.21.0's python/platform/build_info.py, as installed from PyPI.
  const auto cpu = parse_tensorflow_build_info(
      "build_info = collections.OrderedDict([('is_cuda_build', False), ('is_rocm_build', "
      "False), ('is_tensorrt_build', False)])\n");
  REQUIRE(cpu);
  CHECK(cpu->accelerator == "cpu");
  CHECK(cpu->summary() == "CPU only");
  // The CUDA wheel's: the versions it was built against.
  const auto cuda = parse_tensorflow_build_info(
      "build_info = collections.OrderedDict([('cpu_compiler', '/usr/lib/llvm-18/bin/clang'), "
      "('cuda_compute_capabilities', ['sm_60', 'sm_70']), ('cuda_version', '12.5.1'), "
      "('cudnn_version', '9'), ('is_cuda_build', True), ('is_rocm_build', False), "
      "('is_tensorrt_build', False)])\n");
  REQUIRE(cuda);
  CHECK(cuda->summary() == "CUDA 12.5.1, cuDNN 9");
  CHECK_FALSE(parse_tensorflow_build_info("not a build info"));
  // Debian's python3-torch 1.13 and a CUDA wheel's version.py.
  const auto debian = parse_torch_version(
      "__version__ = '1.13.0a0'\ndebug = False\ncuda = None\ngit_version = 'Unknown'\nhip = "
      "None\n");
  REQUIRE(debian);
  CHECK(debian->accelerator == "cpu");
  const auto wheel = parse_torch_version(
      "from typing import Optional\n__version__ = '2.5.1+cu124'\ndebug = False\n"
      "cuda: Optional[str] = '12.4'\ngit_version = 'abc'\nhip: Optional[str] = None\n");
  REQUIRE(wheel);
  CHECK(wheel->accelerator == "cuda");
  CHECK(wheel->cuda == "12.4");
}

TEST_CASE("torch's ROCm and XPU builds are named", "[fingerprint][drm]") {
  using kwd::fingerprint::parse_torch_version;
  // A ROCm wheel before 2.9: hip set, the ROCm release only in the local version.
  const auto rocm = parse_torch_version(
      "from typing import Optional\n__version__ = '2.7.1+rocm6.3'\ndebug = False\n"
      "cuda: Optional[str] = None\ngit_version = 'abc'\nhip: Optional[str] = "
      "'6.3.42131-fa1d09cbd'\nxpu: Optional[str] = None\n");
  REQUIRE(rocm);
  CHECK(rocm->accelerator == "rocm");
  CHECK(rocm->rocm == "6.3");
  CHECK(rocm->summary() == "ROCm 6.3 (HIP 6.3.42131-fa1d09cbd)");
  CHECK(rocm->to_json().at("rocm") == "6.3");
  // 2.9 on writes rocm itself.
  const auto rocm29 = parse_torch_version(
      "__version__ = '2.9.1+rocm6.4'\ncuda: Optional[str] = None\nhip: Optional[str] = "
      "'6.4.43482'\nrocm: Optional[str] = '6.4.2'\nxpu: Optional[str] = None\n");
  REQUIRE(rocm29);
  CHECK(rocm29->rocm == "6.4.2");
  // An XPU wheel: +xpu, and the oneAPI release in xpu.
  const auto xpu = parse_torch_version(
      "__version__ = '2.9.1+xpu'\ndebug = False\ncuda: Optional[str] = None\n"
      "hip: Optional[str] = None\nxpu: Optional[str] = '2025.2'\n");
  REQUIRE(xpu);
  CHECK(xpu->accelerator == "xpu");
  CHECK(xpu->summary() == "XPU (oneAPI 2025.2)");
  // +xpu alone says it too; +cpu says CPU.
  CHECK(
      parse_torch_version("__version__ = '2.8.0+xpu'\nxpu: Optional[str] = None\n")->accelerator ==
      "xpu");
  CHECK(
      parse_torch_version("__version__ = '2.8.0+cpu'\nxpu: Optional[str] = None\n")->accelerator ==
      "cpu");
}

TEST_CASE("PackageIndex does not remember what it could not read as a fact", "[fingerprint]") {
  FakeSite fake;
  PackageIndex index;
  const std::string module = fake.at("tensorflow/libtensorflow_framework.so.2");
  // The METADATA there but not readable for now: a directory in its place fails the read as
  // an I/O error or a stalled mount would, while the file is there.
  const fs::path metadata = fake.site / "tensorflow-2.18.0.dist-info/METADATA";
  fs::remove(metadata);
  fs::create_directory(metadata);
  CHECK_FALSE(index.owner_of(module));
  fs::remove(metadata);
  write_file(metadata, "Metadata-Version: 2.1\nName: tensorflow\nVersion: 2.18.0\n");
  const auto owner = index.owner_of(module);
  REQUIRE(owner);
  CHECK(owner->version == "2.18.0");
}

TEST_CASE("PackageIndex answers from memory until the site directory changes", "[fingerprint]") {
  FakeSite fake;
  PackageIndex index;
  const std::string module =
      fake.at("numpy/core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so");
  REQUIRE(index.owner_of(module)->version == "1.24.2");
  // The metadata changed behind the directory's back (no entry added or removed): the answer
  // kept is given, not a new read per question.
  write_file(fake.site / "numpy-1.24.2.egg-info/PKG-INFO", "Name: numpy\nVersion: 9.9.9\n");
  CHECK(index.owner_of(module)->version == "1.24.2");
  // An upgrade, as pip does it: the old metadata directory goes, a new one comes.
  fs::remove_all(fake.site / "numpy-1.24.2.egg-info");
  write_file(fake.site / "numpy-2.1.0.dist-info/METADATA", "Name: numpy\nVersion: 2.1.0\n");
  auto upgraded = index.owner_of(module);
  REQUIRE(upgraded);
  CHECK(upgraded->version == "2.1.0");
  CHECK(index.find(module, "numpy")->version == "2.1.0");
  // One index per process: the probes of every kernel share what was read.
  CHECK(&PackageIndex::shared() == &PackageIndex::shared());
}
