#include "kwd/probes/linux/system_memory_reader.hpp"

#include <fcntl.h>

#include "kwd/platform/linux/procfs.hpp"
#include "kwd/util/clock.hpp"

namespace kwd::probes::linux_proc {

using platform::linux_proc::find_kb_field;
using platform::linux_proc::pread_all;

SystemMemoryReader::SystemMemoryReader(const std::string& proc_root)
    : meminfo_fd_(::open((proc_root + "/meminfo").c_str(), O_RDONLY | O_CLOEXEC)),
      pressure_fd_(::open((proc_root + "/pressure/memory").c_str(), O_RDONLY | O_CLOEXEC)) {
  refresh(0);
}

void SystemMemoryReader::refresh(std::int64_t min_age_ms) {
  const std::int64_t now = util::steady_ms();
  if (min_age_ms > 0 && last_read_ms_ >= 0 && now - last_read_ms_ < min_age_ms) return;
  last_read_ms_ = now;
  if (meminfo_fd_) {
    if (const auto text = pread_all(meminfo_fd_.get(), buffer_)) {
      mem_total = find_kb_field(*text, "MemTotal").value_or(-1);
      mem_available = find_kb_field(*text, "MemAvailable").value_or(-1);
      swap_total = find_kb_field(*text, "SwapTotal").value_or(-1);
      swap_free = find_kb_field(*text, "SwapFree").value_or(-1);
    }
  }
  if (pressure_fd_) {
    if (const auto text = pread_all(pressure_fd_.get(), buffer_)) pressure = parse_pressure(*text);
  }
}

}  // namespace kwd::probes::linux_proc
