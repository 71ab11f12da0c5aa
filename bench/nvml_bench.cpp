// The NVML worker's own CPU cost per GPU sample, as `run` samples (NvmlWorker, the library
// loaded through the same dlopen path), measured on its thread alone.
//
//   kwd-nvml-bench LIBRARY [SECONDS] [INTERVAL_MS]
//
// Prints one JSON object: samples taken, the worker thread's CPU time per sample in
// microseconds (the waits for Xid events between samples included), and what one sample
// holds (devices, processes). bench/nvml_bench.py runs it next to the same NVML calls made
// from Python through ctypes (what pynvml does).
#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "kwd/probes/nvml/nvml_worker.hpp"

namespace {

// CPU time (ns) of every thread of this process but the calling one (schedstat).
long long other_threads_cpu_ns() {
  long long total = 0;
  const std::string self = std::to_string(::gettid());
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return 0;
  while (const dirent* e = ::readdir(dir)) {
    const std::string tid = e->d_name;
    if (tid == "." || tid == ".." || tid == self) continue;
    std::ifstream in("/proc/self/task/" + tid + "/schedstat");
    long long ns = 0;
    if (in >> ns) total += ns;
  }
  ::closedir(dir);
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: kwd-nvml-bench LIBRARY [SECONDS] [INTERVAL_MS]\n");
    return 2;
  }
  const double seconds = argc > 2 ? std::atof(argv[2]) : 5.0;
  const int interval_ms = argc > 3 ? std::atoi(argv[3]) : 10;
  kwd::probes::nvml::NvmlWorker worker(argv[1], std::chrono::milliseconds(interval_ms));
  if (!worker.wait_started(std::chrono::seconds(10))) {
    std::fprintf(stderr, "NVML did not start\n");
    return 1;
  }
  kwd::probes::nvml::GpuState state;
  std::uint64_t generation = 0;
  worker.copy_if_newer(generation, state);
  if (state.phase != kwd::probes::nvml::GpuState::Phase::running) {
    std::fprintf(stderr, "NVML unavailable: %s\n", state.reason.c_str());
    return 1;
  }
  const std::uint64_t first = generation;
  const long long cpu0 = other_threads_cpu_ns();
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    worker.copy_if_newer(generation, state);
  }
  const long long cpu1 = other_threads_cpu_ns();
  worker.copy_if_newer(generation, state);
  const auto samples = generation - first;
  std::size_t processes = 0;
  for (const auto& d : state.devices)
    processes += d.processes.size();
  std::printf(
      "{\"samples\": %llu, \"worker_cpu_us_per_sample\": %.2f, \"devices\": %zu, "
      "\"processes\": %zu}\n",
      static_cast<unsigned long long>(samples),
      samples > 0 ? static_cast<double>(cpu1 - cpu0) / 1000.0 / static_cast<double>(samples) : 0.0,
      state.devices.size(), processes);
  return 0;
}
