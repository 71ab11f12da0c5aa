#include "kwd/probes/darwin/vm_pressure_probe.hpp"

#include <mach/vm_page_size.h>
#include <sys/sysctl.h>

#include <nlohmann/json.hpp>

#include "kwd/util/clock.hpp"

namespace kwd::probes::darwin {
namespace {

template <typename T>
bool sysctl_value(const char* name, T& out) {
  std::size_t size = sizeof out;
  return sysctlbyname(name, &out, &size, nullptr, 0) == 0 && size == sizeof out;
}

const char* level_name(int level) {
  switch (level) {
    case 1:
      return "normal";
    case 2:
      return "warning";
    case 4:
      return "critical";
    default:
      return "unknown";
  }
}

}  // namespace

VmPressureProbe::VmPressureProbe(const ProbeOptions& options)
    : host_(mach_host_self()), interval_ms_(options.slow_interval.count()) {
  read_now();
}

VmPressureProbe::~VmPressureProbe() {
  mach_port_deallocate(mach_task_self(), host_);
}

ProbeStatus VmPressureProbe::status() const {
  return {"darwin.vm_pressure", ok_,
          ok_ ? "host_statistics64, vm.swapusage, kern.memorystatus_vm_pressure_level every " +
                    std::to_string(interval_ms_) + " ms"
              : "host_statistics64(HOST_VM_INFO64) failed"};
}

void VmPressureProbe::read_now() {
  vm_statistics64_data_t vm{};
  mach_msg_type_number_t count = HOST_VM_INFO64_COUNT;
  ok_ = host_statistics64(host_, HOST_VM_INFO64, reinterpret_cast<host_info64_t>(&vm), &count) ==
        KERN_SUCCESS;
  if (ok_) {
    const auto page = static_cast<std::int64_t>(vm_kernel_page_size);
    // What can be had without paging anything out or compressing it: free, inactive,
    // speculative and purgeable pages (an approximation of Activity Monitor's figure).
    available_ = (static_cast<std::int64_t>(vm.free_count) + vm.inactive_count +
                  vm.speculative_count + vm.purgeable_count) *
                 page;
    compressed_ = static_cast<std::int64_t>(vm.compressor_page_count) * page;
    wired_ = static_cast<std::int64_t>(vm.wire_count) * page;
  }
  std::uint64_t memsize = 0;
  if (sysctl_value("hw.memsize", memsize)) mem_total_ = static_cast<std::int64_t>(memsize);
  xsw_usage swap{};
  if (sysctl_value("vm.swapusage", swap)) {
    swap_total_ = static_cast<std::int64_t>(swap.xsu_total);
    swap_used_ = static_cast<std::int64_t>(swap.xsu_used);
  }
  int level = 0;
  if (sysctl_value("kern.memorystatus_vm_pressure_level", level)) pressure_level_ = level;
}

void VmPressureProbe::sample(timeline::MemorySample& into) {
  const std::int64_t now = util::steady_ms();
  if (last_read_ms_ < 0 || now - last_read_ms_ >= interval_ms_) {
    last_read_ms_ = now;
    read_now();
  }
  into.mem_total = mem_total_;
  into.mem_available = available_;
}

void VmPressureProbe::on_kernel_exit(const KernelExit& /*how*/) {
  read_now();
}

void VmPressureProbe::contribute(nlohmann::json& report) const {
  using nlohmann::json;
  const auto bytes = [](std::int64_t v) { return v >= 0 ? json(v) : json(nullptr); };
  report["system_memory"] = {
      {"mem_total", bytes(mem_total_)},
      {"mem_available", bytes(available_)},
      {"swap_total", bytes(swap_total_)},
      {"swap_free",
       swap_total_ >= 0 && swap_used_ >= 0 ? json(swap_total_ - swap_used_) : json(nullptr)},
      {"psi", nullptr},  // Linux only
      {"compressed", bytes(compressed_)},
      {"wired", bytes(wired_)},
      {"pressure_level", pressure_level_ != 0 ? json(level_name(pressure_level_)) : json(nullptr)}};
}

}  // namespace kwd::probes::darwin
