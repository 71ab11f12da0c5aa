#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "kwd/smoke/sharding.hpp"

namespace kwd::smoke {

struct SmokeOptions {
  std::string kernel_name;    // --kernel; empty: the notebook's, else python3
  std::filesystem::path cwd;  // --cwd; empty: each notebook's folder
  // Per cell; 0: none. Unset: the notebook's metadata execution.timeout, else 300.
  std::optional<double> timeout_s;
  double startup_timeout_s = 60;  // until the kernel answers kernel_info_request
  double interrupt_grace_s = 10;  // after an interrupt, before the kernel is killed
  bool allow_errors = false;
  std::optional<std::uint64_t> memory_limit;  // a memory cgroup per kernel
  int thrash_timeout_s = 30;                  // under it (launch::KernelLaunch::thrash_timeout)
  std::optional<std::uint64_t> max_rss;       // per-notebook peak budgets
  std::optional<std::uint64_t> max_gpu;
  int jobs = 1;
  // -j auto: the ceiling is the CPUs; with --memory-aware (implied by auto): notebooks start
  // as their recorded peaks fit in the memory smoke runs in (admission.hpp).
  bool jobs_auto = false;
  bool memory_aware = false;
  std::filesystem::path output_dir = "smoke-results";
  std::filesystem::path junit;  // empty: none
  bool json = false;
  std::string nvml_library;
  // --resource-spec-file: CTest's resource spec; its GPUs, by slots, instead of NVML's.
  std::filesystem::path resource_spec_file;
  bool faulthandler = true;
  // --ipython-history: where IPython kernels keep their history. In memory, as nbclient has
  // it: a CI run does not add to the user's history file, kernels run in parallel do not
  // contend for its SQLite lock, and a cell costs the kernel no write to disk. Empty: the
  // kernel's own setting ("profile"); else an absolute path.
  std::string ipython_history = ":memory:";
  std::optional<Shard> shard;       // --shard K/N: only this part of the notebooks runs
  std::filesystem::path durations;  // --durations: read to balance shards; empty: none
  bool store_durations = false;     // --store-durations: this run's times into `durations`
};

}  // namespace kwd::smoke
