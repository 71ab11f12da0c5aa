#include "kwd/probes/linux/shared_memory_probe.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/vfs.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "kwd/util/clock.hpp"

namespace kwd::probes::linux_proc {

SharedMemoryProbe::SharedMemoryProbe(const ProbeOptions& options)
    : path_(options.proc_root + "/" + std::to_string(options.kernel_pid) + "/root/dev/shm"),
      interval_ms_(options.slow_interval.count()) {
  if (read()) {
    reason_ = path_ + ", a tmpfs, every " + std::to_string(interval_ms_) +
              " ms, at cell edges and when the kernel dies";
  } else if (reason_.empty()) {
    reason_ = "cannot read " + path_;
  }
}

bool SharedMemoryProbe::read() {
  if (!dir_) dir_.reset(::open(path_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  struct statfs fs {};
  if (!dir_ || ::fstatfs(dir_.get(), &fs) != 0) return false;
  if (fs.f_type != TMPFS_MAGIC) {
    tmpfs_ = false;
    reason_ = path_ + " is not a tmpfs";
    return false;
  }
  tmpfs_ = true;
  const auto block = static_cast<std::int64_t>(fs.f_frsize ? fs.f_frsize : fs.f_bsize);
  size_ = static_cast<std::int64_t>(fs.f_blocks) * block;
  used_ = static_cast<std::int64_t>(fs.f_blocks - fs.f_bfree) * block;
  peak_used_ = std::max(peak_used_, used_);
  return true;
}

ProbeStatus SharedMemoryProbe::status() const {
  return {"linux.shared_memory", tmpfs_, reason_};
}

void SharedMemoryProbe::sample(timeline::MemorySample& /*into*/) {
  // One statfs through procfs is cheap, but a daemon samples hundreds of kernels: the fill
  // level that matters is the one at a cell's end or the kernel's death, read then.
  const auto now = util::steady_ms();
  if (!tmpfs_ || (last_read_ms_ >= 0 && now - last_read_ms_ < interval_ms_)) return;
  last_read_ms_ = now;
  read();
}

void SharedMemoryProbe::on_cell_edge(bool /*running*/, std::int64_t /*at_ms*/, bool /*sampled*/) {
  if (tmpfs_) read();
}

void SharedMemoryProbe::on_kernel_dying() {
  // faulthandler is writing its dump: what filled /dev/shm is still there.
  if (tmpfs_) read();
}

void SharedMemoryProbe::contribute(nlohmann::json& report) const {
  if (!tmpfs_ || size_ < 0) return;
  report["shared_memory"] = {{"path", "/dev/shm"},
                             {"read_through", path_},
                             {"size_bytes", size_},
                             {"used_bytes", used_},
                             {"peak_used_bytes", peak_used_}};
}

}  // namespace kwd::probes::linux_proc
