#include "kwd/watch/live_status.hpp"

#include <cstdlib>

#include "kwd/report/report_store.hpp"
#include "kwd/timeline/trend.hpp"

namespace kwd::watch {

std::string execution_state(const Watch& watch) {
  const auto* listener = watch.listener();
  if (listener == nullptr) return "unknown";
  if (listener->current_hang()) return "hung";
  const auto& state = listener->activity().execution_state();
  return state ? *state : "starting";
}

nlohmann::json live_memory(const Watch& watch) {
  nlohmann::json out = nlohmann::json::object();
  const auto* s = watch.timeline().latest();
  if (s == nullptr) return out;
  if (s->rss >= 0) out["rss_bytes"] = s->rss;
  if (s->gpu_used >= 0) out["gpu_bytes"] = s->gpu_used;
  const auto recent = watch.timeline().recent();
  for (const auto& old : recent)
    if (old.t_ms >= s->t_ms - 60'000 && old.rss >= 0 && s->rss >= 0) {
      out["rss_change_60s_bytes"] = s->rss - old.rss;
      break;
    }
  out["limits"] = timeline::limits_to_json(live_limits(watch));
  out["sampled_at_ms"] = s->t_ms;
  return out;
}

timeline::Limits live_limits(const Watch& watch) {
  return timeline::compute_limits(timeline::after_startup(
      watch.timeline().recent(),
      watch.listener() ? watch.listener()->activity().ready_at_ms() : std::nullopt,
      watch.kernel_started_at_ms()));
}

std::filesystem::path live_status_dir() {
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  if (xdg != nullptr && xdg[0] == '/')
    return std::filesystem::path(xdg) / "kernel-watchdog" / "kernels";
  // Beside the store the environment names, not the one --report-dir names: the Jupyter
  // server (python/kernel_watchdog/_live_status.py) knows the environment, not the option.
  return report::ReportStore::resolve_dir("").parent_path() / "kernels";
}

}  // namespace kwd::watch
