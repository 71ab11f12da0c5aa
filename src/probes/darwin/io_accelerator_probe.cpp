#include "kwd/probes/darwin/io_accelerator_probe.hpp"

#include <CoreFoundation/CoreFoundation.h>
#include <IOKit/IOKitLib.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "kwd/util/clock.hpp"

namespace kwd::probes::darwin {
namespace {

// Owns one I/O Kit object reference.
class IoObject {
 public:
  explicit IoObject(io_object_t object = IO_OBJECT_NULL) : object_(object) {}
  ~IoObject() {
    if (object_ != IO_OBJECT_NULL) IOObjectRelease(object_);
  }
  IoObject(const IoObject&) = delete;
  IoObject& operator=(const IoObject&) = delete;
  [[nodiscard]] io_object_t get() const { return object_; }
  io_object_t* out() { return &object_; }

 private:
  io_object_t object_;
};

// Owns one Core Foundation reference (a Create/Copy result).
class CfRef {
 public:
  explicit CfRef(CFTypeRef ref) : ref_(ref) {}
  ~CfRef() {
    if (ref_ != nullptr) CFRelease(ref_);
  }
  CfRef(const CfRef&) = delete;
  CfRef& operator=(const CfRef&) = delete;
  [[nodiscard]] CFTypeRef get() const { return ref_; }

 private:
  CFTypeRef ref_;
};

std::int64_t number_in(CFDictionaryRef dict, const char* key) {
  const CfRef name(CFStringCreateWithCString(kCFAllocatorDefault, key, kCFStringEncodingUTF8));
  const void* value = CFDictionaryGetValue(dict, name.get());
  std::int64_t out = -1;
  if (value != nullptr && CFGetTypeID(value) == CFNumberGetTypeID())
    CFNumberGetValue(static_cast<CFNumberRef>(value), kCFNumberSInt64Type, &out);
  return out;
}

}  // namespace

IoAcceleratorProbe::IoAcceleratorProbe(const ProbeOptions& options)
    : interval_ms_(options.gpu_interval.count()) {
  read_now();
}

ProbeStatus IoAcceleratorProbe::status() const {
  if (accelerators_.empty())
    return {"darwin.io_accelerator", false,
            problem_.empty() ? "no IOAccelerator service" : problem_};
  return {"darwin.io_accelerator", true,
          "IOAccelerator PerformanceStatistics every " + std::to_string(interval_ms_) + " ms"};
}

void IoAcceleratorProbe::read_now() {
  accelerators_.clear();
  IoObject iterator;
  // MACH_PORT_NULL: the default main port, on every macOS version.
  if (IOServiceGetMatchingServices(MACH_PORT_NULL, IOServiceMatching("IOAccelerator"),
                                   iterator.out()) != KERN_SUCCESS) {
    problem_ = "IOServiceGetMatchingServices(IOAccelerator) failed";
    return;
  }
  for (;;) {
    const IoObject service(IOIteratorNext(iterator.get()));
    if (service.get() == IO_OBJECT_NULL) break;
    const CfRef stats(IORegistryEntryCreateCFProperty(service.get(), CFSTR("PerformanceStatistics"),
                                                      kCFAllocatorDefault, 0));
    if (stats.get() == nullptr || CFGetTypeID(stats.get()) != CFDictionaryGetTypeID()) continue;
    const auto dict = static_cast<CFDictionaryRef>(stats.get());
    Accelerator a;
    io_name_t name{};
    if (IOObjectGetClass(service.get(), name) == KERN_SUCCESS) a.io_class = name;
    a.in_use_system_memory = number_in(dict, "In use system memory");
    a.alloc_system_memory = number_in(dict, "Alloc system memory");
    a.device_utilization_percent = number_in(dict, "Device Utilization %");
    accelerators_.push_back(std::move(a));
  }
}

void IoAcceleratorProbe::sample(timeline::MemorySample& into) {
  const std::int64_t now = util::steady_ms();
  if (last_read_ms_ < 0 || now - last_read_ms_ >= interval_ms_) {
    last_read_ms_ = now;
    read_now();
  }
  std::int64_t in_use = -1;
  for (const auto& a : accelerators_)
    if (a.in_use_system_memory >= 0)
      in_use = std::max<std::int64_t>(in_use, 0) + a.in_use_system_memory;
  if (in_use >= 0) {
    into.unified_in_use = in_use;
    peak_in_use_ = std::max(peak_in_use_, in_use);
  }
}

void IoAcceleratorProbe::contribute(nlohmann::json& report) const {
  using nlohmann::json;
  const auto opt = [](std::int64_t v) { return v >= 0 ? json(v) : json(nullptr); };
  json list = json::array();
  for (const auto& a : accelerators_) {
    list.push_back({{"io_class", a.io_class},
                    {"in_use_system_memory", opt(a.in_use_system_memory)},
                    {"alloc_system_memory", opt(a.alloc_system_memory)},
                    {"device_utilization_percent", opt(a.device_utilization_percent)}});
  }
  report["unified_memory"] = {{"accelerators", list},
                              {"peak_in_use_system_memory", opt(peak_in_use_)}};
}

}  // namespace kwd::probes::darwin
