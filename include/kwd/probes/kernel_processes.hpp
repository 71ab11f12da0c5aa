#pragma once

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <vector>

namespace kwd::probes {

// Who belongs to the kernel: the process-tree probe writes it on every sample, the probes
// that must attribute what they see (GPU processes, OOM-killer log lines) read it. Those
// reports often arrive after the process is gone, so the last departed pids are kept too.
// Everything runs on the event loop's thread; fixed memory whatever the session length.
class KernelProcesses {
 public:
  explicit KernelProcesses(pid_t root) : root_(root) {}

  [[nodiscard]] pid_t root() const noexcept { return root_; }
  // Current members, sorted.
  [[nodiscard]] const std::vector<pid_t>& members() const noexcept { return members_; }
  [[nodiscard]] bool is_member(pid_t pid) const;
  // A member now, the root, or one of the last kDepartedKept to leave.
  [[nodiscard]] bool belongs(pid_t pid) const;

  void set_members(std::vector<pid_t> pids);
  void departed(pid_t pid);

  static constexpr std::size_t kDepartedKept = 256;

 private:
  pid_t root_;
  std::vector<pid_t> members_;
  std::array<pid_t, kDepartedKept> departed_{};
  std::size_t departed_next_ = 0;
  std::size_t departed_count_ = 0;
};

}  // namespace kwd::probes
