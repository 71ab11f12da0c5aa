#include "kwd/probes/nvml/nvml_library.hpp"

#include <dlfcn.h>

#include <array>

namespace kwd::probes::nvml {
namespace {

constexpr const char* kDefaultLibrary = "libnvidia-ml.so.1";

// More compute processes than any GPU runs: a driver's count beyond this is not believed
// (a bad count must not make the watchdog allocate gigabytes).
constexpr std::size_t kMaxProcesses = 4096;

// A versioned entry point that is there but not implemented by this driver.
bool entry_point_refused(Return code) {
  return code == kErrorFunctionNotFound || code == kErrorArgumentVersionMismatch;
}

}  // namespace

std::string return_code_name(Return code) {
  switch (code) {
    case kSuccess:
      return "Success";
    case kErrorUninitialized:
      return "Uninitialized";
    case kErrorInvalidArgument:
      return "Invalid Argument";
    case kErrorNotSupported:
      return "Not Supported";
    case kErrorNoPermission:
      return "Insufficient Permissions";
    case kErrorAlreadyInitialized:
      return "Already Initialized";
    case kErrorNotFound:
      return "Not Found";
    case kErrorInsufficientSize:
      return "Insufficient Size";
    case kErrorInsufficientPower:
      return "Insufficient External Power";
    case kErrorDriverNotLoaded:
      return "Driver Not Loaded";
    case kErrorTimeout:
      return "Timeout";
    case kErrorIrqIssue:
      return "Interrupt Request Issue";
    case kErrorLibraryNotFound:
      return "NVML Shared Library Not Found";
    case kErrorFunctionNotFound:
      return "Function Not Found";
    case kErrorCorruptedInforom:
      return "Corrupted infoROM";
    case kErrorGpuIsLost:
      return "GPU is lost";
    case kErrorResetRequired:
      return "GPU requires restart";
    case kErrorOperatingSystem:
      return "The operating system has blocked the request";
    case kErrorLibRmVersionMismatch:
      return "RM has detected an NVML/RM version mismatch";
    case kErrorInUse:
      return "In use by another client";
    case kErrorMemory:
      return "Insufficient Memory";
    case kErrorNoData:
      return "No data";
    case kErrorArgumentVersionMismatch:
      return "Argument version mismatch";
    default:
      return "Unknown Error (" + std::to_string(code) + ")";
  }
}

void NvmlLibrary::DlClose::operator()(void* handle) const noexcept {
  ::dlclose(handle);
}

template <typename Fn>
Fn NvmlLibrary::symbol(const char* name) const {
  // POSIX guarantees a data pointer from dlsym converts to a function pointer.
  return reinterpret_cast<Fn>(::dlsym(handle_.get(), name));
}

std::unique_ptr<NvmlLibrary> NvmlLibrary::load(const std::filesystem::path& path,
                                               std::string& problem) {
  auto lib = std::make_unique<NvmlLibrary>(Key{});
  lib->path_ = path.empty() ? std::string(kDefaultLibrary) : path.string();
  ::dlerror();
  lib->handle_.reset(::dlopen(lib->path_.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (!lib->handle_) {
    const char* why = ::dlerror();
    problem =
        "no NVIDIA driver: cannot load " + lib->path_ + " (" + (why ? why : "dlopen failed") + ")";
    return nullptr;
  }
  auto init = lib->symbol<InitFn>("nvmlInit_v2");
  if (!init) init = lib->symbol<InitFn>("nvmlInit");
  lib->shutdown_ = lib->symbol<ShutdownFn>("nvmlShutdown");
  if (!init || !lib->shutdown_) {
    problem = "no NVIDIA driver: " + lib->path_ + " is not NVML (no nvmlInit/nvmlShutdown)";
    return nullptr;
  }
  lib->error_string_ = lib->symbol<ErrorStringFn>("nvmlErrorString");
  lib->driver_version_ = lib->symbol<SystemGetDriverVersionFn>("nvmlSystemGetDriverVersion");
  lib->device_count_ = lib->symbol<DeviceGetCountFn>("nvmlDeviceGetCount_v2");
  if (!lib->device_count_) lib->device_count_ = lib->symbol<DeviceGetCountFn>("nvmlDeviceGetCount");
  lib->device_by_index_ = lib->symbol<DeviceGetHandleByIndexFn>("nvmlDeviceGetHandleByIndex_v2");
  if (!lib->device_by_index_)
    lib->device_by_index_ = lib->symbol<DeviceGetHandleByIndexFn>("nvmlDeviceGetHandleByIndex");
  lib->name_ = lib->symbol<DeviceGetNameFn>("nvmlDeviceGetName");
  lib->uuid_ = lib->symbol<DeviceGetUuidFn>("nvmlDeviceGetUUID");
  lib->memory_v2_ = lib->symbol<DeviceGetMemoryInfo_v2Fn>("nvmlDeviceGetMemoryInfo_v2");
  lib->memory_v1_ = lib->symbol<DeviceGetMemoryInfoFn>("nvmlDeviceGetMemoryInfo");
  lib->processes_v3_ =
      lib->symbol<DeviceGetComputeRunningProcesses_v2Fn>("nvmlDeviceGetComputeRunningProcesses_v3");
  lib->processes_v2_ =
      lib->symbol<DeviceGetComputeRunningProcesses_v2Fn>("nvmlDeviceGetComputeRunningProcesses_v2");
  lib->processes_v1_ =
      lib->symbol<DeviceGetComputeRunningProcesses_v1Fn>("nvmlDeviceGetComputeRunningProcesses");
  lib->event_set_create_ = lib->symbol<EventSetCreateFn>("nvmlEventSetCreate");
  lib->register_events_ = lib->symbol<DeviceRegisterEventsFn>("nvmlDeviceRegisterEvents");
  lib->event_set_wait_ = lib->symbol<EventSetWaitFn>("nvmlEventSetWait_v2");
  if (!lib->event_set_wait_) lib->event_set_wait_ = lib->symbol<EventSetWaitFn>("nvmlEventSetWait");
  lib->event_set_free_ = lib->symbol<EventSetFreeFn>("nvmlEventSetFree");
  if (!lib->device_count_ || !lib->device_by_index_) {
    problem = "no NVIDIA driver: " + lib->path_ + " lacks nvmlDeviceGetCount/GetHandleByIndex";
    return nullptr;
  }

  const Return rc = init();
  if (rc != kSuccess) {
    problem = "no NVIDIA driver: nvmlInit: " + lib->error_string(rc) + " (" + lib->path_ + ")";
    return nullptr;
  }
  lib->initialised_ = true;
  return lib;
}

NvmlLibrary::~NvmlLibrary() {
  if (initialised_) shutdown_();
}

std::string NvmlLibrary::error_string(Return code) const {
  if (error_string_) {
    if (const char* s = error_string_(code); s != nullptr && *s != '\0') return s;
  }
  return return_code_name(code);
}

Answer<std::string> NvmlLibrary::driver_version() const {
  if (!driver_version_) return {kErrorFunctionNotFound, {}};
  std::array<char, kSystemDriverVersionBufferSize> buf{};
  const Return rc = driver_version_(buf.data(), static_cast<unsigned int>(buf.size()));
  if (rc != kSuccess) return {rc, {}};
  buf.back() = '\0';
  return {rc, std::string(buf.data())};
}

Answer<unsigned int> NvmlLibrary::device_count() const {
  unsigned int n = 0;
  const Return rc = device_count_(&n);
  return {rc, n};
}

Answer<Device> NvmlLibrary::device(unsigned int index) const {
  Device d = nullptr;
  const Return rc = device_by_index_(index, &d);
  return {rc, d};
}

Answer<std::string> NvmlLibrary::name(Device device) const {
  if (!name_) return {kErrorFunctionNotFound, {}};
  std::array<char, kDeviceNameBufferSize> buf{};
  const Return rc = name_(device, buf.data(), static_cast<unsigned int>(buf.size()));
  buf.back() = '\0';
  return {rc, rc == kSuccess ? std::string(buf.data()) : std::string()};
}

Answer<std::string> NvmlLibrary::uuid(Device device) const {
  if (!uuid_) return {kErrorFunctionNotFound, {}};
  std::array<char, kDeviceUuidBufferSize> buf{};
  const Return rc = uuid_(device, buf.data(), static_cast<unsigned int>(buf.size()));
  buf.back() = '\0';
  return {rc, rc == kSuccess ? std::string(buf.data()) : std::string()};
}

Answer<DeviceMemory> NvmlLibrary::memory(Device device) const {
  Return rc = kErrorFunctionNotFound;
  if (memory_v2_) {
    Memory_v2 m{};
    m.version = kMemory_v2_Version;
    rc = memory_v2_(device, &m);
    if (rc == kSuccess) {
      memory_version_ = 2;
      return {rc, {m.total, m.used, m.free}};
    }
    if (entry_point_refused(rc)) memory_v2_ = nullptr;  // an older driver: v1 from now on
  }
  // v1 also where v2 said NOT_SUPPORTED: some virtualised GPUs implement only the old call.
  if (memory_v1_) {
    Memory_v1 m{};
    const Return rc1 = memory_v1_(device, &m);
    if (rc1 == kSuccess) {
      memory_version_ = 1;
      return {rc1, {m.total, m.used, m.free}};
    }
    if (rc == kErrorFunctionNotFound || rc == kErrorArgumentVersionMismatch) rc = rc1;
  }
  return {rc, {}};
}

Return NvmlLibrary::compute_processes(Device device, ProcessBuffer& buffer,
                                      std::vector<GpuProcess>& out) const {
  out.clear();
  const auto take = [&out](unsigned int pid, unsigned long long used) {
    out.push_back(
        {pid, used == kValueNotAvailable ? std::nullopt : std::optional<unsigned long long>(used)});
  };
  // Grow on INSUFFICIENT_SIZE (NVML then says how many it has); a few rounds at most, as
  // processes may start between two calls.
  const auto query = [&](auto fn, auto& vec) -> Return {
    if (vec.size() < 16) vec.resize(16);
    for (int round = 0; round < 8; ++round) {
      unsigned int count = static_cast<unsigned int>(vec.size());
      const Return rc = fn(device, &count, vec.data());
      if (rc == kErrorInsufficientSize) {
        const std::size_t grown =
            std::min(std::max<std::size_t>(static_cast<std::size_t>(count) + 8, vec.size() * 2),
                     kMaxProcesses);
        if (grown <= vec.size()) return rc;
        vec.resize(grown);
        continue;
      }
      if (rc == kSuccess) {
        for (unsigned int i = 0; i < count && i < vec.size(); ++i)
          take(vec[i].pid, vec[i].usedGpuMemory);
      }
      return rc;
    }
    return kErrorInsufficientSize;
  };
  Return rc = kErrorFunctionNotFound;
  if (processes_v3_) {
    rc = query(processes_v3_, buffer.v2);
    if (!entry_point_refused(rc)) {
      if (rc == kSuccess) processes_version_ = 3;
      return rc;
    }
    processes_v3_ = nullptr;
  }
  if (processes_v2_) {
    rc = query(processes_v2_, buffer.v2);
    if (!entry_point_refused(rc)) {
      if (rc == kSuccess) processes_version_ = 2;
      return rc;
    }
    processes_v2_ = nullptr;
  }
  if (processes_v1_) {
    rc = query(processes_v1_, buffer.v1);
    if (rc == kSuccess) processes_version_ = 1;
  }
  return rc;
}

bool NvmlLibrary::has_events() const {
  return event_set_create_ && register_events_ && event_set_wait_ && event_set_free_;
}

Answer<EventSet> NvmlLibrary::create_event_set() const {
  if (!has_events()) return {kErrorFunctionNotFound, nullptr};
  EventSet set = nullptr;
  const Return rc = event_set_create_(&set);
  return {rc, set};
}

Return NvmlLibrary::register_xid_events(Device device, EventSet set) const {
  if (!has_events()) return kErrorFunctionNotFound;
  return register_events_(device, kEventTypeXidCriticalError, set);
}

Return NvmlLibrary::wait_event(EventSet set, EventData& data, unsigned int timeout_ms) const {
  if (!has_events()) return kErrorFunctionNotFound;
  return event_set_wait_(set, &data, timeout_ms);
}

void NvmlLibrary::free_event_set(EventSet set) const {
  if (has_events() && set != nullptr) event_set_free_(set);
}

std::string NvmlLibrary::memory_api() const {
  if (memory_version_ != 0) return "v" + std::to_string(memory_version_);
  return memory_v2_ ? "v2" : memory_v1_ ? "v1" : "none";
}

std::string NvmlLibrary::processes_api() const {
  if (processes_version_ != 0) return "v" + std::to_string(processes_version_);
  return processes_v3_ ? "v3" : processes_v2_ ? "v2" : processes_v1_ ? "v1" : "none";
}

}  // namespace kwd::probes::nvml
