#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kwd/protocol/listener_options.hpp"

namespace kwd::launch {

struct RunOptions {
  std::vector<std::string> kernel_argv;
  bool forward_sigint = false;
  std::string report_dir;  // empty: ReportStore::resolve_dir()
  std::size_t stderr_buffer_bytes = 256 * 1024;
  std::chrono::milliseconds sample_interval{100};
  std::chrono::seconds full_rate_window{120};
  // After the watchdog alone got SIGTERM/SIGHUP/SIGQUIT and the kernel is still alive this
  // long, the signal is passed on (a launcher that signals our pid, not the group).
  std::chrono::milliseconds forward_termination_after{1000};
  // IOPub and heartbeat: --heartbeat-interval, --heartbeat-misses, --last-cells.
  protocol::ListenerOptions listener;
  // --memory-limit: the kernel runs in a memory cgroup of its own with this limit.
  std::optional<std::uint64_t> memory_limit;
  std::string nvml_library;  // --nvml-library / $KERNEL_WATCHDOG_NVML; empty: default search
  std::chrono::milliseconds gpu_interval{500};
  // --no-faulthandler: leave the kernel's faulthandler alone (no sitecustomize shim, no
  // PYTHONFAULTHANDLER), and so no Python traceback in crash reports.
  bool faulthandler = true;
};

}  // namespace kwd::launch
