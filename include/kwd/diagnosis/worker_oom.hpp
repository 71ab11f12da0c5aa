#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kwd/diagnosis/findings.hpp"
#include "kwd/diagnosis/report_view.hpp"

namespace kwd::diagnosis {

// A process of the kernel (a DataLoader worker, most often) that the OOM killer took before
// it took the kernel: the kernel died of the same shortage, second. Linux picks the largest
// process first, but when the first victim's memory is not yet given back (its exit starved of
// CPU, the reaper unable to take its memory map) the next kill takes the next largest.
struct EarlierVictim {
  std::int64_t pid = 0;
  std::string command;   // the kernel's name for it ("python3", "pt_data_worker")
  std::size_t log_line;  // its "Killed process" line in /oom_evidence/kernel_log
};

// Read from the kernel log lines the report keeps, in the order the kernel killed them; empty
// unless the log names the kernel's own death after them.
std::vector<EarlierVictim> killed_before_kernel(const ReportView& report);

// Whether the cell that was running uses a PyTorch DataLoader (whose workers are the kernel's
// processes that grow the most).
bool cell_uses_dataloader(const ReportView& report);

// The advice for DataLoader workers that hold too much, for a cell whose worker the OOM killer
// took (cell_failure.cpp) and for a kernel taken after its worker (remedies_memory.cpp).
Remedy dataloader_workers_hold_less(std::string why);

}  // namespace kwd::diagnosis
