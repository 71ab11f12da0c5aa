#include "kwd/probes/linux/system_memory_probe.hpp"

#include <fcntl.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "kwd/probes/linux/procfs.hpp"
#include "kwd/util/clock.hpp"

namespace kwd::probes::linux_proc {

SystemMemoryProbe::SystemMemoryProbe(const ProbeOptions& options)
    : meminfo_fd_(::open((options.proc_root + "/meminfo").c_str(), O_RDONLY | O_CLOEXEC)),
      pressure_fd_(::open((options.proc_root + "/pressure/memory").c_str(), O_RDONLY | O_CLOEXEC)),
      interval_ms_(options.slow_interval.count()) {
  read_now();
  if (!meminfo_fd_ || mem_total_ < 0) {
    reason_ = "cannot read " + options.proc_root + "/meminfo";
    return;
  }
  reason_ = "/proc/meminfo";
  reason_ +=
      pressure_ ? " and /proc/pressure/memory" : " (no PSI: kernel without CONFIG_PSI or psi=0)";
  reason_ += " every " + std::to_string(interval_ms_) + " ms";
}

ProbeStatus SystemMemoryProbe::status() const {
  return {"linux.system_memory", meminfo_fd_ && mem_total_ >= 0, reason_};
}

void SystemMemoryProbe::read_now() {
  static thread_local std::string buf;
  if (meminfo_fd_) {
    if (const auto text = pread_all(meminfo_fd_.get(), buf)) {
      mem_total_ = find_kb_field(*text, "MemTotal").value_or(-1);
      mem_available_ = find_kb_field(*text, "MemAvailable").value_or(-1);
      swap_total_ = find_kb_field(*text, "SwapTotal").value_or(-1);
      swap_free_ = find_kb_field(*text, "SwapFree").value_or(-1);
    }
  }
  if (pressure_fd_) {
    if (const auto text = pread_all(pressure_fd_.get(), buf)) pressure_ = parse_pressure(*text);
  }
}

void SystemMemoryProbe::sample(timeline::MemorySample& into) {
  const std::int64_t now = util::steady_ms();
  if (last_read_ms_ < 0 || now - last_read_ms_ >= interval_ms_) {
    last_read_ms_ = now;
    read_now();
  }
  into.mem_total = mem_total_;
  into.mem_available = mem_available_;
  if (pressure_) into.psi_some_avg10 = std::llround(pressure_->some_avg10 * 100.0);
}

void SystemMemoryProbe::on_kernel_exit(const KernelExit& /*how*/) {
  read_now();
}

void SystemMemoryProbe::contribute(nlohmann::json& report) const {
  using nlohmann::json;
  const auto bytes = [](std::int64_t v) { return v >= 0 ? json(v) : json(nullptr); };
  json psi = nullptr;
  if (pressure_) {
    psi = {{"some_avg10", pressure_->some_avg10},
           {"some_avg60", pressure_->some_avg60},
           {"full_avg10", pressure_->has_full ? json(pressure_->full_avg10) : json(nullptr)},
           {"full_avg60", pressure_->has_full ? json(pressure_->full_avg60) : json(nullptr)}};
  }
  report["system_memory"] = {{"mem_total", bytes(mem_total_)},
                             {"mem_available", bytes(mem_available_)},
                             {"swap_total", bytes(swap_total_)},
                             {"swap_free", bytes(swap_free_)},
                             {"psi", psi}};
}

}  // namespace kwd::probes::linux_proc
