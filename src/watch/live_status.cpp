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

namespace {

// Without word from the kernel, its start-up is taken to last this long under watch.
constexpr std::int64_t kStartupWithoutWordMs = 30'000;

// The samples a rate toward a limit may be drawn from: those since the kernel said it was
// ready. Its start-up (imports: tens of MiB in a second, then flat) would otherwise be
// extrapolated into a warning that the limit is seconds away, at every kernel start.
std::vector<timeline::MemorySample> since_ready(const Watch& watch,
                                                std::vector<timeline::MemorySample> recent) {
  const auto* listener = watch.listener();
  if (listener == nullptr || recent.empty()) return recent;
  const std::int64_t from =
      listener->activity().ready_at_ms().value_or(watch.started_at_ms() + kStartupWithoutWordMs);
  if (from > recent.back().t_ms) return {recent.back()};  // still starting: no rate yet
  std::erase_if(recent, [&](const timeline::MemorySample& x) { return x.t_ms < from; });
  return recent;
}

}  // namespace

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
  out["limits"] = timeline::limits_to_json(timeline::compute_limits(since_ready(watch, recent)));
  out["sampled_at_ms"] = s->t_ms;
  return out;
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
