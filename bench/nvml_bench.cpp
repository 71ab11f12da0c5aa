// The NVML worker's own CPU cost per GPU sample, as `run` samples (NvmlWorker, the library
// loaded through the same dlopen path), measured on its thread alone.
//
//   kwd-nvml-bench LIBRARY [SECONDS] [INTERVAL_MS] [CELL_ENDS_PER_S]
//   kwd-nvml-bench LIBRARY --calls N
//
// Prints one JSON object: samples taken, the worker thread's CPU time per sample in
// microseconds and per second in milliseconds (its looks for Xid events between samples
// included), and what one sample holds (devices, processes). With CELL_ENDS_PER_S, the
// main thread plays the event loop at that many cell ends a second (sample_and_wait, as
// NvmlProbe at each end) and the time it waited for each reading is printed too. With
// --calls, the calls one sample makes (memory info, then the running processes, through
// NvmlLibrary as the worker makes them) N times back to back: their CPU per sample, for the
// raw-call comparison.
// bench/nvml_bench.py runs it next to the same NVML calls made from Python through ctypes (what
// pynvml does).
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "kwd/probes/nvml/nvml_library.hpp"
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

// The worker's calls for one device, back to back, on this thread.
int calls_back_to_back(const char* library, long iterations) {
  std::string problem;
  const auto lib = kwd::probes::nvml::NvmlLibrary::load(library, problem);
  if (!lib) {
    std::fprintf(stderr, "NVML unavailable: %s\n", problem.c_str());
    return 1;
  }
  const auto device = lib->device(0);
  if (!device.ok()) {
    std::fprintf(stderr, "no device 0\n");
    return 1;
  }
  kwd::probes::nvml::ProcessBuffer buffer;
  std::vector<kwd::probes::nvml::GpuProcess> processes;
  const auto one = [&] {
    (void)lib->memory(device.value);
    (void)lib->compute_processes(device.value, buffer, processes);
  };
  for (int i = 0; i < 200; ++i)
    one();
  timespec t0{}, t1{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
  for (long i = 0; i < iterations; ++i)
    one();
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
  const double ns = static_cast<double>(t1.tv_sec - t0.tv_sec) * 1e9 +
                    static_cast<double>(t1.tv_nsec - t0.tv_nsec);
  std::printf("{\"calls_cpu_us_per_sample\": %.2f, \"iterations\": %ld, \"processes\": %zu}\n",
              ns / 1000.0 / static_cast<double>(iterations), iterations, processes.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: kwd-nvml-bench LIBRARY [SECONDS] [INTERVAL_MS] [CELL_ENDS_PER_S]\n");
    return 2;
  }
  if (argc > 3 && std::string(argv[2]) == "--calls")
    return calls_back_to_back(argv[1], std::atol(argv[3]));
  const double seconds = argc > 2 ? std::atof(argv[2]) : 5.0;
  const int interval_ms = argc > 3 ? std::atoi(argv[3]) : 10;
  const int cell_ends_per_s = argc > 4 ? std::atoi(argv[4]) : 0;
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
  const auto t0 = std::chrono::steady_clock::now();
  const long long cpu0 = other_threads_cpu_ns();
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  const auto pause = std::chrono::milliseconds(cell_ends_per_s > 0 ? 1000 / cell_ends_per_s : 50);
  std::vector<double> waits_us;
  while (std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(pause);
    if (cell_ends_per_s > 0) {
      const auto asked = std::chrono::steady_clock::now();
      const bool came = worker.sample_and_wait(std::chrono::milliseconds(2));
      waits_us.push_back(
          came ? std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - asked)
                     .count()
               : -1.0);
    }
    worker.copy_if_newer(generation, state);
  }
  const long long cpu1 = other_threads_cpu_ns();
  const double elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  worker.copy_if_newer(generation, state);
  const auto samples = generation - first;
  std::size_t processes = 0;
  for (const auto& d : state.devices)
    processes += d.processes.size();
  std::sort(waits_us.begin(), waits_us.end());
  const auto missed = std::count(waits_us.begin(), waits_us.end(), -1.0);
  const auto quantile = [&](double q) {
    const auto came = waits_us.size() - static_cast<std::size_t>(missed);
    if (came == 0) return 0.0;
    return waits_us[static_cast<std::size_t>(missed) +
                    std::min(came - 1, static_cast<std::size_t>(q * static_cast<double>(came)))];
  };
  std::printf(
      "{\"samples\": %llu, \"worker_cpu_us_per_sample\": %.2f, \"worker_cpu_ms_per_s\": %.3f, "
      "\"cell_ends\": %zu, \"cell_end_wait_us_p50\": %.1f, \"cell_end_wait_us_max\": %.1f, "
      "\"cell_ends_not_read_in_2ms\": %lld, \"devices\": %zu, \"processes\": %zu}\n",
      static_cast<unsigned long long>(samples),
      samples > 0 ? static_cast<double>(cpu1 - cpu0) / 1000.0 / static_cast<double>(samples) : 0.0,
      static_cast<double>(cpu1 - cpu0) / 1e6 / elapsed_s, waits_us.size(), quantile(0.5),
      quantile(1.0), static_cast<long long>(missed), state.devices.size(), processes);
  return 0;
}
