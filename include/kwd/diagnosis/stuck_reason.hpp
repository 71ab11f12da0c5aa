#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

namespace kwd::diagnosis {

// What a stuck kernel's stacks show it waits on, in words, from the `stacks` object of a report
// (docs/report-format.md: hang.stacks, smoke's cell stacks): input() that no front end answers,
// threads that each wait for a lock, the DataLoader's workers, a collective (NCCL, Gloo, MPI),
// the GPU, OpenMP or BLAS threads spinning, or the cell's own Python code running.
struct StuckReason {
  std::string id;       // "input", "lock_deadlock", "dataloader", "collective", "gpu_sync", ...
  std::string text;     // "waiting for input(): ...": what it is before the colon, then the detail
  std::string pointer;  // the thread it rests on, under the stacks object ("/threads/0")
};

// nullopt when the stacks say nothing more specific than where the main thread is.
std::optional<StuckReason> stuck_reason(const nlohmann::json& stacks);

}  // namespace kwd::diagnosis
