#include "kwd/diagnosis/worker_oom.hpp"

#include <charconv>
#include <optional>
#include <string_view>

namespace kwd::diagnosis {

namespace {

// "Killed process 4242 (python3) total-vm:..." (with "Out of memory: " or "Memory cgroup out of
// memory: " in front): the pid, followed by a space, and the command in parentheses.
std::optional<OomVictim> victim_in(std::string_view line, std::size_t index) {
  constexpr std::string_view tag = "Killed process ";
  const auto at = line.find(tag);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = line.substr(at + tag.size());
  OomVictim victim;
  victim.log_line = index;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), victim.pid);
  if (ec != std::errc() || end == rest.data()) return std::nullopt;
  rest.remove_prefix(static_cast<std::size_t>(end - rest.data()));
  if (!rest.starts_with(' ')) return std::nullopt;
  if (rest.starts_with(" (")) {
    const auto close = rest.find(')');
    if (close != std::string_view::npos) victim.command = std::string(rest.substr(2, close - 2));
  }
  return victim;
}

}  // namespace

std::vector<OomVictim> oom_victims(const ReportView& report) {
  std::vector<OomVictim> victims;
  const auto& log = report.array("/oom_evidence/kernel_log");
  for (std::size_t i = 0; i < log.size(); ++i)
    if (log[i].is_string())
      if (auto victim = victim_in(log[i].get_ref<const std::string&>(), i))
        victims.push_back(std::move(*victim));
  return victims;
}

std::vector<OomVictim> killed_before_kernel(const ReportView& report) {
  const auto kernel_pid = report.integer("/kernel/pid");
  if (!kernel_pid) return {};
  std::vector<OomVictim> before;
  for (auto& victim : oom_victims(report)) {
    if (victim.command.empty()) continue;  // not a line in the kernel's own form
    if (victim.pid == *kernel_pid) return before;
    before.push_back(std::move(victim));
  }
  return {};  // the log does not say the kernel was killed after them
}

bool cell_uses_dataloader(const ReportView& report) {
  const auto code = report.text("/execution/cell_in_flight/code");
  return code && code->find("DataLoader") != std::string::npos;
}

Remedy dataloader_workers_hold_less(std::string why) {
  return {"torch.dataloader_worker_memory",
          "Make each worker hold less: load items lazily in __getitem__ instead of caching "
          "them in the Dataset, use fewer workers (num_workers) or smaller batches; every "
          "worker's memory counts against the same limit as the kernel's.",
          std::move(why)};
}

}  // namespace kwd::diagnosis
