// What an NVIDIA driver hands back to NvmlLibrary: return codes, the memory and process
// structs, driver/name/UUID strings (terminated or not), process counts and Xid event data.
// The answers come from the input through fuzz_nvml_driver.c, a libnvidia-ml.so.1 loaded by
// NvmlLibrary::load like the real one; the first byte picks a current or an old driver.
#include <dlfcn.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "kwd/probes/nvml/nvml_library.hpp"

namespace {

using Feed = void (*)(const unsigned char*, std::size_t);

struct Driver {
  std::string path;
  Feed feed = nullptr;
};

// Opened once and kept open, so that NvmlLibrary::load's dlopen per run is a reference count.
Driver open_driver(const char* flavour) {
  Driver d;
  d.path = std::string(KWD_FUZZ_NVML_DIR) + "/" + flavour + "/libnvidia-ml.so.1";
  void* handle = ::dlopen(d.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) std::abort();
  d.feed = reinterpret_cast<Feed>(::dlsym(handle, "fuzz_nvml_feed"));
  if (d.feed == nullptr) std::abort();
  return d;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kwd::probes::nvml;
  static const Driver drivers[] = {open_driver("current"), open_driver("legacy")};
  if (size == 0) return 0;
  const Driver& driver = drivers[data[0] & 1];
  driver.feed(data + 1, size - 1);

  std::string problem;
  const auto lib = NvmlLibrary::load(driver.path, problem);
  if (!lib) return 0;
  (void)lib->driver_version();
  const auto count = lib->device_count();
  ProcessBuffer buffer;
  std::vector<GpuProcess> processes;
  std::vector<Device> devices;
  const unsigned int n = count.ok() ? std::min(count.value, 4u) : 0;
  for (unsigned int i = 0; i < n; ++i) {
    const auto device = lib->device(i);
    if (!device.ok()) {
      (void)lib->error_string(device.code);
      continue;
    }
    devices.push_back(device.value);
    (void)lib->name(device.value);
    (void)lib->uuid(device.value);
    for (int round = 0; round < 2; ++round) {  // the second goes where the first settled
      const auto memory = lib->memory(device.value);
      if (!memory.ok()) (void)lib->error_string(memory.code);
      const Return rc = lib->compute_processes(device.value, buffer, processes);
      if (rc != kSuccess) (void)lib->error_string(rc);
      if (processes.size() > buffer.v1.size() + buffer.v2.size()) std::abort();
    }
  }
  if (lib->has_events()) {
    const auto set = lib->create_event_set();
    if (set.ok()) {
      for (const Device d : devices)
        (void)lib->register_xid_events(d, set.value);
      for (int i = 0; i < 2; ++i) {
        EventData event{};
        (void)lib->wait_event(set.value, event, 0);
      }
      lib->free_event_set(set.value);
    }
  }
  (void)lib->memory_api();
  (void)lib->processes_api();
  return 0;
}
