#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kwd/diagnosis/findings.hpp"
#include "kwd/diagnosis/report_view.hpp"

namespace kwd::diagnosis {

// A process the OOM killer took, as its "Killed process PID (comm) ..." line in the kernel log
// the report keeps (/oom_evidence/kernel_log) names it.
struct OomVictim {
  std::int64_t pid = 0;
  std::string command;       // the kernel's name for it ("python3"); empty when the line has none
  std::size_t log_line = 0;  // the line's index in /oom_evidence/kernel_log
};

// Every victim that log names, in the order the kernel killed them: the one reading of those
// lines for the rules of a death and of a failed cell.
std::vector<OomVictim> oom_victims(const ReportView& report);

// The processes of the kernel (a DataLoader worker, most often) that the OOM killer took before
// it took the kernel: the kernel died of the same shortage, second. Linux picks the largest
// process first, but when the first victim's memory is not yet given back (its exit starved of
// CPU, the reaper unable to take its memory map) the next kill takes the next largest. Empty
// unless the log names the kernel's own death after them.
std::vector<OomVictim> killed_before_kernel(const ReportView& report);

// Whether the cell that was running uses a PyTorch DataLoader (whose workers are the kernel's
// processes that grow the most).
bool cell_uses_dataloader(const ReportView& report);

// The advice for DataLoader workers that hold too much, for a cell whose worker the OOM killer
// took (cell_failure.cpp) and for a kernel taken after its worker (remedies_memory.cpp).
Remedy dataloader_workers_hold_less(std::string why);

}  // namespace kwd::diagnosis
