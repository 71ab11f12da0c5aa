#pragma once

// The part of NVIDIA's NVML C ABI this watchdog uses, declared from NVML's reference
// documentation (nvml.h, r470 and later) so that no CUDA toolkit is needed to build. The
// library itself is loaded with dlopen at run time. Layouts are pinned by static_asserts.

#include <cstddef>

namespace kwd::probes::nvml {

using Return = int;  // nvmlReturn_t, a C enum

enum : Return {
  kSuccess = 0,
  kErrorUninitialized = 1,
  kErrorInvalidArgument = 2,
  kErrorNotSupported = 3,
  kErrorNoPermission = 4,
  kErrorAlreadyInitialized = 5,
  kErrorNotFound = 6,
  kErrorInsufficientSize = 7,
  kErrorInsufficientPower = 8,
  kErrorDriverNotLoaded = 9,
  kErrorTimeout = 10,
  kErrorIrqIssue = 11,
  kErrorLibraryNotFound = 12,
  kErrorFunctionNotFound = 13,
  kErrorCorruptedInforom = 14,
  kErrorGpuIsLost = 15,
  kErrorResetRequired = 16,
  kErrorOperatingSystem = 17,
  kErrorLibRmVersionMismatch = 18,
  kErrorInUse = 19,
  kErrorMemory = 20,
  kErrorNoData = 21,
  kErrorArgumentVersionMismatch = 25,
  kErrorUnknown = 999,
};

struct DeviceHandle;  // nvmlDevice_t points at an opaque struct
using Device = DeviceHandle*;
struct EventSetHandle;
using EventSet = EventSetHandle*;

// nvmlMemory_t (nvmlDeviceGetMemoryInfo)
struct Memory_v1 {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
// nvmlMemory_v2_t (nvmlDeviceGetMemoryInfo_v2): `version` must hold nvmlMemory_v2.
struct Memory_v2 {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};
// NVML_STRUCT_VERSION(Memory, 2): the struct's size in the low bits, the version above.
inline constexpr unsigned int kMemory_v2_Version =
    static_cast<unsigned int>(sizeof(Memory_v2)) | (2u << 24);

// nvmlProcessInfo_v1_t (nvmlDeviceGetComputeRunningProcesses)
struct ProcessInfo_v1 {
  unsigned int pid;
  unsigned long long usedGpuMemory;
};
// nvmlProcessInfo_v2_t and nvmlProcessInfo_t (the _v2 and _v3 functions)
struct ProcessInfo_v2 {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
// usedGpuMemory when the driver cannot tell (WDDM, some MIG setups).
inline constexpr unsigned long long kValueNotAvailable = ~0ULL;

// nvmlEventData_t; releases before MIG (r450) end after eventData, so a 24-byte prefix.
struct EventData {
  Device device;
  unsigned long long eventType;
  unsigned long long eventData;  // the Xid, for nvmlEventTypeXidCriticalError
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
inline constexpr unsigned long long kEventTypeXidCriticalError = 0x0000000000000008ULL;

inline constexpr unsigned int kSystemDriverVersionBufferSize = 80;
inline constexpr unsigned int kDeviceNameBufferSize = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
inline constexpr unsigned int kDeviceUuidBufferSize = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE

static_assert(sizeof(Memory_v1) == 24);
static_assert(sizeof(Memory_v2) == 40 && offsetof(Memory_v2, total) == 8);
static_assert(kMemory_v2_Version == 0x02000028u);
static_assert(sizeof(ProcessInfo_v1) == 16 && offsetof(ProcessInfo_v1, usedGpuMemory) == 8);
static_assert(sizeof(ProcessInfo_v2) == 24 && offsetof(ProcessInfo_v2, gpuInstanceId) == 16);
static_assert(sizeof(EventData) == 32 && offsetof(EventData, eventData) == 16);

// The function types, as nvml.h declares them.
extern "C" {
using InitFn = Return (*)();
using ShutdownFn = Return (*)();
using ErrorStringFn = const char* (*)(Return);
using SystemGetDriverVersionFn = Return (*)(char*, unsigned int);
using DeviceGetCountFn = Return (*)(unsigned int*);
using DeviceGetHandleByIndexFn = Return (*)(unsigned int, Device*);
using DeviceGetNameFn = Return (*)(Device, char*, unsigned int);
using DeviceGetUuidFn = Return (*)(Device, char*, unsigned int);
using DeviceGetMemoryInfoFn = Return (*)(Device, Memory_v1*);
using DeviceGetMemoryInfo_v2Fn = Return (*)(Device, Memory_v2*);
using DeviceGetComputeRunningProcesses_v1Fn = Return (*)(Device, unsigned int*, ProcessInfo_v1*);
using DeviceGetComputeRunningProcesses_v2Fn = Return (*)(Device, unsigned int*, ProcessInfo_v2*);
using EventSetCreateFn = Return (*)(EventSet*);
using DeviceRegisterEventsFn = Return (*)(Device, unsigned long long, EventSet);
using DeviceGetSupportedEventTypesFn = Return (*)(Device, unsigned long long*);
using EventSetWaitFn = Return (*)(EventSet, EventData*, unsigned int);
using EventSetFreeFn = Return (*)(EventSet);
}

}  // namespace kwd::probes::nvml
