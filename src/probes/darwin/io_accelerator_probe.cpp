#include "kwd/probes/darwin/io_accelerator_probe.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "kwd/probes/darwin/io_kit_library.hpp"
#include "kwd/util/clock.hpp"

namespace kwd::probes::darwin {
namespace {

// Owns one I/O Kit object reference.
class IoObject {
 public:
  IoObject(const IoKitLibrary& lib, io_object_t object) : lib_(lib), object_(object) {}
  ~IoObject() {
    if (object_ != io_kit::kNullObject) lib_.IOObjectRelease(object_);
  }
  IoObject(const IoObject&) = delete;
  IoObject& operator=(const IoObject&) = delete;
  [[nodiscard]] io_object_t get() const { return object_; }
  io_object_t* out() { return &object_; }

 private:
  const IoKitLibrary& lib_;
  io_object_t object_;
};

// Owns one Core Foundation reference (a Create/Copy result).
class CfRef {
 public:
  CfRef(const IoKitLibrary& lib, io_kit::CFTypeRef ref) : lib_(lib), ref_(ref) {}
  ~CfRef() {
    if (ref_ != nullptr) lib_.CFRelease(ref_);
  }
  CfRef(const CfRef&) = delete;
  CfRef& operator=(const CfRef&) = delete;
  [[nodiscard]] io_kit::CFTypeRef get() const { return ref_; }

 private:
  const IoKitLibrary& lib_;
  io_kit::CFTypeRef ref_;
};

io_kit::CFStringRef make_string(const IoKitLibrary& lib, const char* text) {
  return lib.CFStringCreateWithCString(io_kit::kDefaultAllocator, text,
                                       io_kit::kCFStringEncodingUTF8);
}

std::int64_t number_in(const IoKitLibrary& lib, io_kit::CFDictionaryRef dict, const char* key) {
  const CfRef name(lib, make_string(lib, key));
  if (name.get() == nullptr) return -1;
  const void* value = lib.CFDictionaryGetValue(dict, name.get());
  std::int64_t out = -1;
  if (value != nullptr && lib.CFGetTypeID(value) == lib.CFNumberGetTypeID())
    lib.CFNumberGetValue(static_cast<io_kit::CFNumberRef>(value), io_kit::kCFNumberSInt64Type,
                         &out);
  return out;
}

}  // namespace

IoAcceleratorProbe::IoAcceleratorProbe(const ProbeOptions& options)
    : lib_(IoKitLibrary::get(problem_)), interval_ms_(options.gpu_interval.count()) {
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
  if (lib_ == nullptr) return;
  const IoKitLibrary& lib = *lib_;
  IoObject iterator(lib, io_kit::kNullObject);
  // The matching dictionary is consumed by the call, whatever it returns.
  if (lib.IOServiceGetMatchingServices(io_kit::kMainPortDefault,
                                       lib.IOServiceMatching("IOAccelerator"),
                                       iterator.out()) != KERN_SUCCESS) {
    problem_ = "IOServiceGetMatchingServices(IOAccelerator) failed";
    return;
  }
  const CfRef key(lib, make_string(lib, "PerformanceStatistics"));
  if (key.get() == nullptr) return;
  for (;;) {
    const IoObject service(lib, lib.IOIteratorNext(iterator.get()));
    if (service.get() == io_kit::kNullObject) break;
    const CfRef stats(lib, lib.IORegistryEntryCreateCFProperty(
                               service.get(), static_cast<io_kit::CFStringRef>(key.get()),
                               io_kit::kDefaultAllocator, 0));
    if (stats.get() == nullptr || lib.CFGetTypeID(stats.get()) != lib.CFDictionaryGetTypeID())
      continue;
    const auto dict = static_cast<io_kit::CFDictionaryRef>(stats.get());
    Accelerator a;
    io_name_t name{};
    if (lib.IOObjectGetClass(service.get(), name) == KERN_SUCCESS) a.io_class = name;
    a.in_use_system_memory = number_in(lib, dict, "In use system memory");
    a.alloc_system_memory = number_in(lib, dict, "Alloc system memory");
    a.device_utilization_percent = number_in(lib, dict, "Device Utilization %");
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
