#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace kwd::supervisor {

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
};

}  // namespace kwd::supervisor
