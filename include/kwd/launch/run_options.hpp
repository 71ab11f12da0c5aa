#pragma once

#include <chrono>
#include <string>

#include "kwd/launch/watched_kernel.hpp"

namespace kwd::launch {

struct RunOptions {
  // The kernel's command line and how it is watched (KernelLaunch::argv and the rest).
  KernelLaunch kernel;
  bool forward_sigint = false;
  std::string report_dir;  // empty: ReportStore::resolve_dir()
  // After the watchdog alone got SIGTERM/SIGHUP/SIGQUIT and the kernel is still alive this
  // long, the signal is passed on (a launcher that signals our pid, not the group).
  std::chrono::milliseconds forward_termination_after{1000};
};

}  // namespace kwd::launch
