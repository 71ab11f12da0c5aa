// The NVML probe against the fake libnvidia-ml.so.1 that tests/fakes builds (NVML's ABI,
// readings scripted here), loaded through the probe's own dlopen path.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "kwd/probes/nvml/nvml_library.hpp"
#include "kwd/probes/nvml/nvml_probe.hpp"
#include "kwd/util/clock.hpp"

using namespace kwd::probes;
using namespace kwd::probes::nvml;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

const fs::path kCurrent = fs::path(KWD_FAKE_NVML_DIR) / "current" / "libnvidia-ml.so.1";
const fs::path kLegacy = fs::path(KWD_FAKE_NVML_DIR) / "legacy" / "libnvidia-ml.so.1";

// A script file for the fake, and the call log it writes; both removed afterwards. The
// environment is set before any NVML thread starts and left alone while one runs.
class FakeScript {
 public:
  explicit FakeScript(const std::string& text) {
    dir_ = fs::temp_directory_path() /
           ("kwd-fake-nvml-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::create_directories(dir_);
    write(text);
    ::setenv("FAKE_NVML_SCRIPT", (dir_ / "script").c_str(), 1);
    ::setenv("FAKE_NVML_LOG", (dir_ / "log").c_str(), 1);
  }
  ~FakeScript() {
    ::unsetenv("FAKE_NVML_SCRIPT");
    ::unsetenv("FAKE_NVML_LOG");
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // Replaces the script atomically, as the integration tests do.
  void write(const std::string& text) const {
    const auto tmp = dir_ / "script.tmp";
    std::ofstream(tmp) << text;
    fs::rename(tmp, dir_ / "script");
  }
  [[nodiscard]] std::string log() const {
    std::ifstream in(dir_ / "log");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  fs::path dir_;
  static inline int counter_ = 0;
};

const std::string kTwoDevices =
    "driver=550.54.15\n"
    "device.0.name=NVIDIA H100 80GB HBM3\n"
    "device.0.uuid=GPU-11111111-2222-3333-4444-555555555555\n"
    "device.0.total=85899345920\n"
    "device.0.used=4294967296\n"
    "device.0.reserved=536870912\n"
    "device.1.name=NVIDIA A100-SXM4-40GB\n"
    "device.1.uuid=GPU-66666666-7777-8888-9999-000000000000\n"
    "device.1.total=42949672960\n"
    "device.1.used=1073741824\n";

// The kernel is this process; the fake current driver, sampled every 50 ms.
ProbeOptions probe_options(pid_t kernel) {
  ProbeOptions options;
  options.kernel_pid = kernel;
  options.processes = std::make_shared<KernelProcesses>(kernel);
  options.nvml_library = kCurrent;
  options.gpu_interval = 50ms;
  return options;
}

// The probe's report section, sampled every 10 ms until it holds an Xid event (or the time
// is up).
nlohmann::json report_once_an_xid_is_in(NvmlProbe& probe, std::chrono::milliseconds within) {
  kwd::timeline::MemorySample s;
  nlohmann::json report;
  for (auto waited = 0ms; waited < within; waited += 10ms) {
    std::this_thread::sleep_for(10ms);
    probe.sample(s);
    report = nlohmann::json::object();
    probe.contribute(report);
    if (!report["gpu"]["xid_events"].empty()) break;
  }
  return report;
}

}  // namespace

TEST_CASE("NVML: no library at all is 'no NVIDIA driver'") {
  std::string problem;
  const auto lib = NvmlLibrary::load("/nonexistent/libnvidia-ml.so.1", problem);
  CHECK_FALSE(lib);
  CHECK(problem.starts_with("no NVIDIA driver"));
  CHECK(problem.find("/nonexistent/libnvidia-ml.so.1") != std::string::npos);
}

TEST_CASE("NVML: DRIVER_NOT_LOADED from nvmlInit is 'no NVIDIA driver'") {
  FakeScript script("init=9\n");
  std::string problem;
  const auto lib = NvmlLibrary::load(kCurrent, problem);
  CHECK_FALSE(lib);
  CHECK(problem.find("no NVIDIA driver") == 0);
  CHECK(problem.find("Driver Not Loaded") != std::string::npos);
  CHECK(script.log().find("nvmlInit_v2 9") != std::string::npos);
}

TEST_CASE("NVML: a current driver answers through the v2 memory struct and _v3 processes") {
  FakeScript script(kTwoDevices +
                    "device.0.process=4242:3221225472\ndevice.0.filler_processes=100\n");
  std::string problem;
  const auto lib = NvmlLibrary::load(kCurrent, problem);
  REQUIRE(lib);
  CHECK(lib->driver_version().value == "550.54.15");
  REQUIRE(lib->device_count().value == 2);
  const auto dev0 = lib->device(0);
  REQUIRE(dev0.ok());
  CHECK(lib->name(dev0.value).value == "NVIDIA H100 80GB HBM3");
  CHECK(lib->uuid(dev0.value).value == "GPU-11111111-2222-3333-4444-555555555555");

  const auto mem = lib->memory(dev0.value);
  REQUIRE(mem.ok());
  CHECK(lib->memory_api() == "v2");
  CHECK(mem.value.total == 85899345920ull);
  CHECK(mem.value.used == 4294967296ull);  // v2 keeps the reserved memory apart
  CHECK(mem.value.free == 85899345920ull - 4294967296ull - 536870912ull);

  ProcessBuffer buffer;
  std::vector<GpuProcess> processes;
  REQUIRE(lib->compute_processes(dev0.value, buffer, processes) == kSuccess);
  CHECK(lib->processes_api() == "v3");
  REQUIRE(processes.size() == 101);  // more than the first buffer held
  CHECK(processes[0].pid == 4242);
  CHECK(processes[0].used_memory == 3221225472ull);
  // The buffer grew after NVML said INSUFFICIENT_SIZE, then the call succeeded.
  const auto log = script.log();
  CHECK(log.find("nvmlDeviceGetComputeRunningProcesses_v3 7") != std::string::npos);
  CHECK(log.find("nvmlDeviceGetComputeRunningProcesses_v3 0") != std::string::npos);
  CHECK(log.find("nvmlDeviceGetMemoryInfo_v2 0") != std::string::npos);
  CHECK(log.find("nvmlDeviceGetMemoryInfo_v2 25") == std::string::npos);  // version word right
}

// Found by tests/fuzz/fuzz_nvml.cpp: the buffer grew to whatever count INSUFFICIENT_SIZE
// came with (here 2e9 processes: 48 GB).
TEST_CASE("NVML: a process count no GPU has does not grow the buffer without bound") {
  FakeScript script(kTwoDevices + "device.0.filler_processes=2000000000\n");
  std::string problem;
  const auto lib = NvmlLibrary::load(kCurrent, problem);
  REQUIRE(lib);
  ProcessBuffer buffer;
  std::vector<GpuProcess> processes;
  const Return rc = lib->compute_processes(lib->device(0).value, buffer, processes);
  CHECK(rc == kErrorInsufficientSize);
  CHECK(buffer.v2.size() <= 4096);
  CHECK(processes.empty());
}

TEST_CASE("NVML: an old driver without _v2/_v3 entry points is read through v1") {
  FakeScript script(kTwoDevices + "device.1.process=777:na\n");
  std::string problem;
  const auto lib = NvmlLibrary::load(kLegacy, problem);
  REQUIRE(lib);
  const auto dev1 = lib->device(1);
  REQUIRE(dev1.ok());
  const auto mem = lib->memory(dev1.value);
  REQUIRE(mem.ok());
  CHECK(lib->memory_api() == "v1");
  CHECK(mem.value.used == 1073741824ull);
  ProcessBuffer buffer;
  std::vector<GpuProcess> processes;
  REQUIRE(lib->compute_processes(dev1.value, buffer, processes) == kSuccess);
  CHECK(lib->processes_api() == "v1");
  REQUIRE(processes.size() == 1);
  CHECK(processes[0].pid == 777);
  CHECK_FALSE(processes[0].used_memory);  // NVML_VALUE_NOT_AVAILABLE
  CHECK(script.log().find("nvmlInit 0") != std::string::npos);
}

TEST_CASE("NVML: NOT_SUPPORTED answers are reported, not fatal") {
  FakeScript script(kTwoDevices + "device.1.memory=3\ndevice.1.processes=3\n");
  std::string problem;
  const auto lib = NvmlLibrary::load(kCurrent, problem);
  REQUIRE(lib);
  const auto dev1 = lib->device(1);
  CHECK(lib->memory(dev1.value).code == kErrorNotSupported);
  ProcessBuffer buffer;
  std::vector<GpuProcess> processes;
  CHECK(lib->compute_processes(dev1.value, buffer, processes) == kErrorNotSupported);
  CHECK(lib->error_string(kErrorNotSupported) == "Not Supported");
  // The other device is unaffected.
  CHECK(lib->memory(lib->device(0).value).ok());
}

TEST_CASE("NVML probe: per-device and per-process memory, Xid attributed to the kernel's pid") {
  const pid_t me = ::getpid();
  FakeScript script(kTwoDevices + "device.0.process=" + std::to_string(me) +
                    ":2147483648\ndevice.0.process=999999:1000\ndevice.1.memory=3\n");
  NvmlProbe probe(probe_options(me));
  REQUIRE(probe.wait_started(5s));

  kwd::timeline::MemorySample s;
  probe.sample(s);
  REQUIRE(probe.status().available);
  CHECK(probe.status().reason.find("memory info v2, running processes v3") != std::string::npos);
  CHECK(s.gpu_used == 2147483648);         // ours only, not pid 999999's
  CHECK(s.gpu_device_used == 4294967296);  // device 1 could not say
  CHECK(s.gpu_total == 85899345920);

  const auto before = kwd::util::wall_ms();
  script.write(kTwoDevices + "device.0.process=" + std::to_string(me) +
               ":2147483648\ndevice.1.memory=3\nxid=0:31\n");
  nlohmann::json report = report_once_an_xid_is_in(probe, 2s);
  const auto after = kwd::util::wall_ms();
  probe.on_kernel_exit({true, SIGKILL});
  report = nlohmann::json::object();
  probe.contribute(report);
  INFO(report.dump(2));
  const auto& gpu = report["gpu"];
  CHECK(gpu["available"] == true);
  CHECK(gpu["driver_version"] == "550.54.15");
  REQUIRE(gpu["devices"].size() == 2);
  CHECK(gpu["devices"][0]["memory_total"] == 85899345920ull);
  CHECK(gpu["devices"][0]["memory_used"] == 4294967296ull);
  CHECK(gpu["devices"][1]["memory_total"].is_null());
  REQUIRE(gpu["processes"].size() == 1);
  CHECK(gpu["processes"][0]["pid"] == me);
  CHECK(gpu["processes"][0]["used_memory"] == 2147483648ull);
  REQUIRE(gpu["xid_events"].size() == 1);
  CHECK(gpu["xid_events"][0]["xid"] == 31);
  CHECK(gpu["xid_events"][0]["device"] == 0);
  CHECK(gpu["xid_events"][0]["pid"] == me);
  CHECK(gpu["xid_events"][0]["t_ms"].get<std::int64_t>() >= before);
  CHECK(gpu["xid_events"][0]["t_ms"].get<std::int64_t>() <= after);
  bool said = false;
  for (const auto& p : gpu["problems"])
    said |= p.get<std::string>() == "device 1: memory info: Not Supported";
  CHECK(said);
}

TEST_CASE("NVML probe: no driver is a normal, reported state") {
  FakeScript script("init=9\n");
  ProbeOptions options;
  options.kernel_pid = ::getpid();
  options.nvml_library = kCurrent;
  NvmlProbe probe(options);
  REQUIRE(probe.wait_started(5s));
  kwd::timeline::MemorySample s;
  probe.sample(s);
  CHECK_FALSE(probe.status().available);
  CHECK(probe.status().reason.find("no NVIDIA driver") == 0);
  CHECK(s.gpu_used == kwd::timeline::kUnknown);
  nlohmann::json report;
  probe.contribute(report);
  CHECK(report["gpu"]["available"] == false);
  CHECK(report["gpu"]["devices"].empty());
  CHECK(report["gpu"]["xid_events"].empty());
}

TEST_CASE("NVML probe: the library path comes from the option, else the environment") {
  ::setenv("KERNEL_WATCHDOG_NVML", "/from/env/libnvidia-ml.so.1", 1);
  CHECK(NvmlProbe::library_path("/from/option.so") == "/from/option.so");
  CHECK(NvmlProbe::library_path("") == "/from/env/libnvidia-ml.so.1");
  ::unsetenv("KERNEL_WATCHDOG_NVML");
  CHECK(NvmlProbe::library_path("").empty());
}

TEST_CASE("NVML probe: the other processes on the device are named, largest first") {
  // A real process that is not the kernel's holds most of the device: our parent (its
  // command line is readable), and a pid that has no /proc entry (another container's).
  const pid_t me = ::getpid();
  const pid_t other = ::getppid();
  FakeScript script(kTwoDevices + "device.0.process=" + std::to_string(me) +
                    ":2147483648\ndevice.0.process=" + std::to_string(other) +
                    ":64424509440\ndevice.0.process=3999999:1048576\n");
  NvmlProbe probe(probe_options(me));
  REQUIRE(probe.wait_started(5s));
  nlohmann::json report;
  for (int i = 0; i < 200; ++i) {
    kwd::timeline::MemorySample s;
    probe.sample(s);
    report = nlohmann::json::object();
    probe.contribute(report);
    if (report["gpu"]["other_processes"].size() == 2) break;
    std::this_thread::sleep_for(10ms);
  }
  INFO(report.dump(2));
  const auto& others = report["gpu"]["other_processes"];
  REQUIRE(others.size() == 2);
  CHECK(others[0]["pid"] == other);
  CHECK(others[0]["used_memory"] == 64424509440ull);
  CHECK(others[0]["device"] == 0);
  std::ifstream cmdline("/proc/" + std::to_string(other) + "/cmdline");
  std::string first_arg;
  std::getline(cmdline, first_arg, '\0');
  CHECK_THAT(others[0]["command_line"].get<std::string>(), Catch::StartsWith(first_arg));
  CHECK(others[1]["pid"] == 3999999);
  CHECK(others[1]["command_line"] == "");
  REQUIRE(report["gpu"]["processes"].size() == 1);  // the kernel's own stay apart
  CHECK(report["gpu"]["processes"][0]["pid"] == me);
}

TEST_CASE("NVML probes of two kernels share one worker, and each gets every Xid event") {
  const pid_t me = ::getpid();
  const pid_t other = ::getppid();
  FakeScript script(kTwoDevices + "device.0.process=" + std::to_string(me) +
                    ":2147483648\ndevice.1.process=" + std::to_string(other) + ":1048576\n");
  const auto host = std::make_shared<kwd::probes::HostSources>();
  auto first_options = probe_options(me);
  first_options.host = host;
  auto second_options = probe_options(other);
  second_options.host = host;
  NvmlProbe first(first_options);
  NvmlProbe second(second_options);
  CHECK(host->size() == 1);  // one worker, so one NVML thread
  REQUIRE(first.wait_started(5s));

  script.write(kTwoDevices + "device.0.process=" + std::to_string(me) +
               ":2147483648\ndevice.1.process=" + std::to_string(other) +
               ":1048576\nxid=0:31\nxid=1:43\n");
  nlohmann::json a, b;
  for (int i = 0; i < 300; ++i) {
    std::this_thread::sleep_for(10ms);
    kwd::timeline::MemorySample s;
    first.sample(s);
    second.sample(s);
    a = nlohmann::json::object();
    b = nlohmann::json::object();
    first.contribute(a);
    second.contribute(b);
    if (a["gpu"]["xid_events"].size() == 2 && b["gpu"]["xid_events"].size() == 2) break;
  }
  INFO(a.dump(2) << "\n" << b.dump(2));
  // The first reader did not take the events away from the second.
  REQUIRE(a["gpu"]["xid_events"].size() == 2);
  REQUIRE(b["gpu"]["xid_events"].size() == 2);
  // Each kernel's report names its own process on the device that faulted.
  CHECK(a["gpu"]["xid_events"][0]["xid"] == 31);
  CHECK(a["gpu"]["xid_events"][0]["pid"] == me);
  CHECK(b["gpu"]["xid_events"][1]["xid"] == 43);
  CHECK(b["gpu"]["xid_events"][1]["pid"] == other);
  CHECK(a["gpu"]["processes"][0]["pid"] == me);
  CHECK(b["gpu"]["processes"][0]["pid"] == other);

  // A kernel watched later does not inherit the events that came before it.
  auto late_options = probe_options(me);
  late_options.host = host;
  NvmlProbe late(late_options);
  CHECK(host->size() == 1);
  kwd::timeline::MemorySample s;
  late.sample(s);
  nlohmann::json c;
  late.contribute(c);
  CHECK(c["gpu"]["xid_events"].empty());
}

namespace {

std::size_t count_of(const std::string& log, const std::string& call) {
  std::size_t n = 0;
  for (auto at = log.find(call + " "); at != std::string::npos; at = log.find(call + " ", at + 1))
    ++n;
  return n;
}

}  // namespace

// The GPU is sampled at its own rate (2 Hz by default); a cell's end is read when it happens,
// or a short cell's allocation is charged to the next one (seen on an H200), and an Xid of
// that cell is had with it, before the next cell can start.
TEST_CASE("NVML worker: a cell's end is read at once, with the Xid events that came") {
  FakeScript script(kTwoDevices);
  NvmlWorker worker(kCurrent, 60s);  // no sample of its own schedule within the test
  REQUIRE(worker.wait_started(5s));
  const auto samples = [&] { return count_of(script.log(), "nvmlDeviceGetMemoryInfo_v2"); };
  const std::size_t before = samples();
  const auto cursor_at_start = worker.xid_events_end();

  script.write(kTwoDevices + "xid=1:43\n");
  REQUIRE(worker.sample_and_wait(5s));
  CHECK(samples() == before + 2);  // one call per device
  std::uint64_t cursor = cursor_at_start;
  std::vector<kwd::probes::nvml::XidEvent> xids;
  worker.follow_xid_events(cursor, xids);
  REQUIRE(xids.size() == 1);
  CHECK(xids[0].xid == 43);
  CHECK(xids[0].device == 1);

  // Between samples it looks for events after each of its own sleeps (about 4 a second),
  // without waiting in NVML: a cell's end wakes it at once.
  const std::size_t looks = count_of(script.log(), "nvmlEventSetWait_v2");
  std::this_thread::sleep_for(1s);
  const std::size_t in_a_second = count_of(script.log(), "nvmlEventSetWait_v2") - looks;
  INFO("event looks in 1 s: " << in_a_second);
  CHECK(in_a_second >= 2);
  CHECK(in_a_second <= 8);
}

// A "run all" on a loaded machine: cells 2 and 3 end while the worker is still busy with an
// earlier look, so the look that takes cell 2's Xid answers both ends. The Xid is cell 2's
// (placed just before its end), not cell 3's: placed at the later end, a fault the kernel
// went on from passed for one of the last cell before the death (seen in CI).
TEST_CASE("NVML probe: ends asked while the worker is busy place its Xid at the first of them") {
  const pid_t me = ::getpid();
  FakeScript script(kTwoDevices);
  auto options = probe_options(me);
  options.gpu_interval = 60s;  // no sample of the worker's own schedule within the test
  NvmlProbe probe(options);
  REQUIRE(probe.wait_started(5s));
  kwd::timeline::MemorySample s;
  probe.sample(s);
  REQUIRE(probe.status().available);

  // A slow look, begun by cell 1's end: its first memory call takes a second.
  const std::int64_t t = kwd::util::wall_ms();
  script.write(kTwoDevices + "memory_delay_ms=1000\n");
  probe.on_cell_edge(false, t - 3000, false);
  std::this_thread::sleep_for(100ms);
  // Cell 2 faults and ends, cell 3 ends: both ask while that look is still under way.
  script.write(kTwoDevices + "xid=1:43\n");
  probe.on_cell_edge(false, t - 2000, false);
  probe.on_cell_edge(false, t - 1000, false);

  const nlohmann::json report = report_once_an_xid_is_in(probe, 5s);
  INFO(report.dump(2));
  REQUIRE(report["gpu"]["xid_events"].size() == 1);
  CHECK(report["gpu"]["xid_events"][0]["xid"] == 43);
  CHECK(report["gpu"]["xid_events"][0]["t_ms"] == t - 2000 - 1);
}
