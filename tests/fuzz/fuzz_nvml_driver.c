/*
 * A libnvidia-ml.so.1 for the NVML fuzz target: every answer it gives (return codes, the
 * bytes of the structs it fills, strings with or without their NUL, process counts) is read
 * from the fuzzer's input, which the target hands over with fuzz_nvml_feed() before each run.
 * It keeps NVML's C ABI (tests/fakes/fake_nvml.c, include/kwd/probes/nvml/nvml_abi.hpp) and
 * writes no more than the caller said its buffers hold: a driver that overran them would be
 * its own bug; everything else a driver could hand back is fair game.
 *
 * Built twice, like the test fake: a current driver and, with FUZZ_NVML_LEGACY, an old one
 * that exports only the unversioned entry points.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlEventSet_st* nvmlEventSet_t;

static const unsigned char* input;
static size_t input_size, input_at;

EXPORT void fuzz_nvml_feed(const unsigned char* data, size_t size) {
  input = data;
  input_size = size;
  input_at = 0;
}

/* Past the end of the input every byte is 0: success, empty strings, zero counts. */
static unsigned char next_byte(void) {
  return input_at < input_size ? input[input_at++] : 0;
}

static void fill(void* out, size_t n) {
  unsigned char* p = out;
  for (size_t i = 0; i < n; ++i)
    p[i] = next_byte();
}

static unsigned int next_u32(void) {
  unsigned int v = 0;
  fill(&v, sizeof v);
  return v;
}

/* Mostly success, else one of the codes NVML documents for these calls (and one it does not). */
static nvmlReturn_t next_code(void) {
  static const nvmlReturn_t codes[] = {0, 1, 2, 3, 4, 6, 7, 9, 10, 13, 15, 17, 18, 21, 25, 999};
  const unsigned char b = next_byte();
  return b < 128 ? 0 : codes[b % (sizeof codes / sizeof codes[0])];
}

/* Up to `length` bytes of text, NUL-terminated or not (the caller's buffer is zeroed). */
static nvmlReturn_t text_answer(char* out, unsigned int length) {
  const nvmlReturn_t rc = next_code();
  const unsigned int n = next_byte() % (length + 1u);
  fill(out, n);
  return rc;
}

EXPORT nvmlReturn_t nvmlInit(void) {
  return next_code();
}
EXPORT nvmlReturn_t nvmlShutdown(void) {
  return 0;
}

EXPORT const char* nvmlErrorString(nvmlReturn_t result) {
  static char text[64];
  (void)result;
  if (next_byte() & 1) return NULL;
  memset(text, 0, sizeof text);
  fill(text, next_byte() % sizeof text); /* always leaves the last byte NUL */
  return text;
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  return text_answer(version, length);
}

EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) {
  const nvmlReturn_t rc = next_code();
  *count = next_u32();
  return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  const nvmlReturn_t rc = next_code();
  *device = (nvmlDevice_t)(uintptr_t)(0x1000u + index); /* opaque to the caller */
  return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  (void)device;
  return text_answer(name, length);
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  (void)device;
  return text_answer(uuid, length);
}

typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
  unsigned int version;
  unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  (void)device;
  const nvmlReturn_t rc = next_code();
  fill(memory, sizeof *memory);
  return rc;
}

typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

/* On success at most *count entries are written; the count said back is the input's. */
#define PROCESSES(info_type)                                  \
  const nvmlReturn_t rc = next_code();                        \
  const unsigned int capacity = *count;                       \
  const unsigned int said = next_u32();                       \
  if (rc == 0 && infos != NULL) {                             \
    const unsigned int n = said < capacity ? said : capacity; \
    fill(infos, (size_t)n * sizeof(info_type));               \
  }                                                           \
  *count = said;                                              \
  return rc

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int* count,
                                                         nvmlProcessInfo_v1_t* infos) {
  (void)device;
  PROCESSES(nvmlProcessInfo_v1_t);
}

typedef struct {
  nvmlDevice_t device;
  unsigned long long eventType, eventData;
  unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  const nvmlReturn_t rc = next_code();
  *set = (nvmlEventSet_t)(uintptr_t)0x2000u;
  return rc;
}
EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  (void)set;
  return 0;
}
EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types,
                                             nvmlEventSet_t set) {
  (void)device, (void)types, (void)set;
  return next_code();
}
EXPORT nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t* data,
                                     unsigned int timeoutms) {
  (void)set, (void)timeoutms;
  const nvmlReturn_t rc = next_code();
  fill(data, sizeof *data);
  return rc;
}

#ifndef FUZZ_NVML_LEGACY
EXPORT nvmlReturn_t nvmlInit_v2(void) {
  return nvmlInit();
}
EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  return nvmlDeviceGetCount(count);
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  return nvmlDeviceGetHandleByIndex(index, device);
}
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  (void)device;
  const nvmlReturn_t rc = next_code();
  fill(memory, sizeof *memory);
  return rc;
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device,
                                                            unsigned int* count,
                                                            nvmlProcessInfo_t* infos) {
  (void)device;
  PROCESSES(nvmlProcessInfo_t);
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                            unsigned int* count,
                                                            nvmlProcessInfo_t* infos) {
  (void)device;
  PROCESSES(nvmlProcessInfo_t);
}
EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                        unsigned int timeoutms) {
  return nvmlEventSetWait(set, data, timeoutms);
}
#endif
