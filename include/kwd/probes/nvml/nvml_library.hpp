#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kwd/probes/nvml/nvml_abi.hpp"

namespace kwd::probes::nvml {

// NVML's answer to one call: the return code, and the value when it is kSuccess.
template <typename T>
struct Answer {
  Return code = kErrorUnknown;
  T value{};
  [[nodiscard]] bool ok() const { return code == kSuccess; }
};

struct DeviceMemory {
  unsigned long long total = 0;
  unsigned long long used = 0;
  unsigned long long free = 0;
};

struct GpuProcess {
  unsigned int pid = 0;
  std::optional<unsigned long long> used_memory;  // nullopt: NVML_VALUE_NOT_AVAILABLE
};

// Reused between calls so steady-state sampling does not allocate; one per thread.
struct ProcessBuffer {
  std::vector<ProcessInfo_v2> v2;
  std::vector<ProcessInfo_v1> v1;
};

// libnvidia-ml, opened with dlopen and initialised; shut down and closed on destruction.
// Where NVML has grown versioned entry points, the newest one present is used and older
// ones are the fallback (a driver older than the watchdog is the common case). Entry points
// an old driver exports but answers FUNCTION_NOT_FOUND / ARGUMENT_VERSION_MISMATCH for are
// dropped for the next older ones, once. Used from one thread (the NVML probe's worker).
class NvmlLibrary {
 public:
  // Empty path: the dynamic linker's search for libnvidia-ml.so.1. On failure `problem`
  // says why, in words ("no NVIDIA driver: ..."), and nullptr is returned.
  static std::unique_ptr<NvmlLibrary> load(const std::filesystem::path& path, std::string& problem);

  // Only load() makes one (the key is private).
  struct Key {
   private:
    Key() = default;
    friend class NvmlLibrary;
  };
  explicit NvmlLibrary(Key /*only load()*/) {}
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] std::string error_string(Return code) const;

  Answer<std::string> driver_version() const;
  Answer<unsigned int> device_count() const;
  Answer<Device> device(unsigned int index) const;
  Answer<std::string> name(Device device) const;
  Answer<std::string> uuid(Device device) const;
  // nvmlDeviceGetMemoryInfo_v2, else nvmlDeviceGetMemoryInfo.
  Answer<DeviceMemory> memory(Device device) const;
  // nvmlDeviceGetComputeRunningProcesses_v3, else _v2, else the unversioned v1; the buffer
  // grows while NVML answers NVML_ERROR_INSUFFICIENT_SIZE (processes come and go between
  // the calls). `out` is replaced.
  Return compute_processes(Device device, ProcessBuffer& buffer,
                           std::vector<GpuProcess>& out) const;

  [[nodiscard]] bool has_events() const;
  Answer<EventSet> create_event_set() const;
  Return register_xid_events(Device device, EventSet set) const;
  Return wait_event(EventSet set, EventData& data, unsigned int timeout_ms) const;
  void free_event_set(EventSet set) const;

  // Which entry points are in use, for the probe's status line ("v2", "v3"...).
  [[nodiscard]] std::string memory_api() const;
  [[nodiscard]] std::string processes_api() const;

 private:
  struct DlClose {
    void operator()(void* handle) const noexcept;
  };
  template <typename Fn>
  Fn symbol(const char* name) const;

  std::unique_ptr<void, DlClose> handle_;  // declared first: closed last
  std::string path_;
  bool initialised_ = false;

  ShutdownFn shutdown_ = nullptr;
  ErrorStringFn error_string_ = nullptr;
  SystemGetDriverVersionFn driver_version_ = nullptr;
  DeviceGetCountFn device_count_ = nullptr;
  DeviceGetHandleByIndexFn device_by_index_ = nullptr;
  DeviceGetNameFn name_ = nullptr;
  DeviceGetUuidFn uuid_ = nullptr;
  DeviceGetMemoryInfoFn memory_v1_ = nullptr;
  mutable DeviceGetMemoryInfo_v2Fn memory_v2_ = nullptr;
  DeviceGetComputeRunningProcesses_v1Fn processes_v1_ = nullptr;
  mutable DeviceGetComputeRunningProcesses_v2Fn processes_v3_ = nullptr;  // nvmlProcessInfo_t
  mutable DeviceGetComputeRunningProcesses_v2Fn processes_v2_ = nullptr;  // ..._v2_t
  // The newest that answered; later calls go there directly.
  mutable int memory_version_ = 0;
  mutable int processes_version_ = 0;
  EventSetCreateFn event_set_create_ = nullptr;
  DeviceRegisterEventsFn register_events_ = nullptr;
  EventSetWaitFn event_set_wait_ = nullptr;
  EventSetFreeFn event_set_free_ = nullptr;
};

// "Not Supported" for 3, as NVML says it, for codes we may see without a library at hand.
std::string return_code_name(Return code);

}  // namespace kwd::probes::nvml
