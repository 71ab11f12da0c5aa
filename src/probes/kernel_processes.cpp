#include "kwd/probes/kernel_processes.hpp"

#include <algorithm>

namespace kwd::probes {

bool KernelProcesses::is_member(pid_t pid) const {
  return std::binary_search(members_.begin(), members_.end(), pid);
}

bool KernelProcesses::belongs(pid_t pid) const {
  if (pid <= 0) return false;
  if (pid == root_ || is_member(pid)) return true;
  for (std::size_t i = 0; i < departed_count_; ++i)
    if (departed_[i] == pid) return true;
  return false;
}

void KernelProcesses::set_members(std::vector<pid_t> pids) {
  std::sort(pids.begin(), pids.end());
  members_ = std::move(pids);
}

void KernelProcesses::departed(pid_t pid) {
  departed_[departed_next_] = pid;
  departed_next_ = (departed_next_ + 1) % departed_.size();
  departed_count_ = std::min(departed_count_ + 1, departed_.size());
}

}  // namespace kwd::probes
