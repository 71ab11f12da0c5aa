#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "kwd/timeline/trend.hpp"
#include "kwd/watch/watch.hpp"

namespace kwd::watch {

// What a watched kernel is doing now: "idle", "busy", "starting", "hung" or "unknown".
std::string execution_state(const Watch& watch);

// A live kernel's memory as `status --json` and the JupyterLab extension show it:
// rss_bytes, gpu_bytes, rss_change_60s_bytes (each only when known) and `limits`, the
// report's memory.limits (the tightest ceiling and the time to reach it at the current rate).
nlohmann::json live_memory(const Watch& watch);

// Those limits, as computed for live_memory (the samples since the kernel's start-up).
timeline::Limits live_limits(const Watch& watch);

// Where a kernel's `run` keeps its live status: $XDG_RUNTIME_DIR/kernel-watchdog/kernels when
// that is set, else a "kernels" folder beside the report store the environment names
// ($KERNEL_WATCHDOG_REPORT_DIR, $XDG_STATE_HOME, ~/.local/state), whatever --report-dir says:
// the Jupyter server's extension looks there, and it knows the environment, not the option.
std::filesystem::path live_status_dir();

}  // namespace kwd::watch
