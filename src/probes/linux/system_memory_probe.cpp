#include "kwd/probes/linux/system_memory_probe.hpp"

#include <cmath>
#include <nlohmann/json.hpp>

#include "kwd/probes/host_sources.hpp"
#include "kwd/probes/linux/system_memory_reader.hpp"

namespace kwd::probes::linux_proc {

SystemMemoryProbe::SystemMemoryProbe(const ProbeOptions& options)
    : reader_(host_source<SystemMemoryReader>(
          options.host, options.proc_root,
          [&] { return std::make_shared<SystemMemoryReader>(options.proc_root); },
          [](const SystemMemoryReader& reader) { return !reader.readable(); })),
      interval_ms_(options.slow_interval.count()) {
  if (!reader_->readable()) {
    reason_ = "cannot read " + options.proc_root + "/meminfo";
    return;
  }
  reason_ = "/proc/meminfo";
  reason_ += reader_->pressure ? " and /proc/pressure/memory"
                               : " (no PSI: kernel without CONFIG_PSI or psi=0)";
  reason_ += " every " + std::to_string(interval_ms_) + " ms";
}

SystemMemoryProbe::~SystemMemoryProbe() = default;

ProbeStatus SystemMemoryProbe::status() const {
  return {"linux.system_memory", reader_->readable(), reason_};
}

void SystemMemoryProbe::sample(timeline::MemorySample& into) {
  reader_->refresh(interval_ms_);
  into.mem_total = reader_->mem_total;
  into.mem_available = reader_->mem_available;
  if (reader_->pressure) into.psi_some_avg10 = std::llround(reader_->pressure->some_avg10 * 100.0);
}

void SystemMemoryProbe::on_kernel_exit(const KernelExit& /*how*/) {
  reader_->refresh(0);
}

void SystemMemoryProbe::contribute(nlohmann::json& report) const {
  using nlohmann::json;
  const auto bytes = [](std::int64_t v) { return v >= 0 ? json(v) : json(nullptr); };
  json psi = nullptr;
  if (const auto& p = reader_->pressure) {
    psi = {{"some_avg10", p->some_avg10},
           {"some_avg60", p->some_avg60},
           {"full_avg10", p->has_full ? json(p->full_avg10) : json(nullptr)},
           {"full_avg60", p->has_full ? json(p->full_avg60) : json(nullptr)}};
  }
  report["system_memory"] = {{"mem_total", bytes(reader_->mem_total)},
                             {"mem_available", bytes(reader_->mem_available)},
                             {"swap_total", bytes(reader_->swap_total)},
                             {"swap_free", bytes(reader_->swap_free)},
                             {"psi", psi}};
}

}  // namespace kwd::probes::linux_proc
