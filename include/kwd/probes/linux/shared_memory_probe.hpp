#pragma once

#include <cstdint>
#include <string>

#include "kwd/probes/probe.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::probes::linux_proc {

// The kernel's /dev/shm, seen through its own root (/proc/<pid>/root/dev/shm), so that a
// kernel in a container is measured in its container's tmpfs: its size, and how full it was.
// PyTorch shares tensors between processes (DataLoader workers, share_memory_()) as files
// there, and Docker gives a container 64 MiB: a write past the free space is a SIGBUS, which
// only this size and fill level tell apart from any other bus error. One statfs a second, at
// cell edges and when the kernel is dying.
class SharedMemoryProbe final : public Probe {
 public:
  explicit SharedMemoryProbe(const ProbeOptions& options);

  [[nodiscard]] ProbeStatus status() const override;
  void sample(timeline::MemorySample& into) override;
  void contribute(nlohmann::json& report) const override;
  void on_kernel_dying() override;
  void on_cell_edge(bool running, std::int64_t at_ms, bool sampled) override;

 private:
  // Reads the file system's size and use; false when it is gone or no tmpfs.
  bool read();

  std::string path_;
  // The directory, held: statfs through /proc/PID/root walks the path each time (the daemon
  // samples hundreds of kernels), and the path is gone once the kernel is, the fd is not.
  util::UniqueFd dir_;
  std::int64_t interval_ms_;
  std::int64_t last_read_ms_ = -1;
  std::string reason_;
  bool tmpfs_ = false;
  std::int64_t size_ = -1;
  std::int64_t used_ = -1;
  std::int64_t peak_used_ = -1;
};

}  // namespace kwd::probes::linux_proc
