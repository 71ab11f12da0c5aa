#include "kwd/diagnosis/worker_oom.hpp"

#include <regex>

namespace kwd::diagnosis {

std::vector<EarlierVictim> killed_before_kernel(const ReportView& report) {
  const auto kernel_pid = report.integer("/kernel/pid");
  if (!kernel_pid) return {};
  static const std::regex killed(R"(Killed process ([0-9]+) \(([^)]*)\))");
  std::vector<EarlierVictim> before;
  const auto& log = report.array("/oom_evidence/kernel_log");
  for (std::size_t i = 0; i < log.size(); ++i) {
    if (!log[i].is_string()) continue;
    const auto& line = log[i].get_ref<const std::string&>();
    std::smatch m;
    if (!std::regex_search(line, m, killed)) continue;
    const std::int64_t pid = std::stoll(m[1].str());
    if (pid == *kernel_pid) return before;
    before.push_back({pid, m[2].str(), i});
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
