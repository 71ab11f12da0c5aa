/*
 * A stand-in for NVIDIA's libnvidia-ml.so.1, for machines without an NVIDIA GPU. The
 * watchdog loads it through the same dlopen path as the real library (--nvml-library or
 * KERNEL_WATCHDOG_NVML), so it keeps NVML's ABI: the struct layouts, the version words and
 * the return codes of NVML's reference documentation, and the same argument checks.
 *
 * Its readings are scripted by the test in the file named by $FAKE_NVML_SCRIPT, re-read
 * whenever it changes (write it elsewhere and rename it into place). One "key=value" a line:
 *
 *   init=0                         nvmlInit's return code (9: NVML_ERROR_DRIVER_NOT_LOADED)
 *   driver=550.54.15
 *   device.N.name=NVIDIA H100 80GB HBM3     (devices 0..N, in order, up to 8)
 *   device.N.uuid=GPU-...
 *   device.N.total=BYTES   device.N.used=BYTES   device.N.reserved=BYTES
 *   device.N.memory=RC             return code of the memory-info calls (3: NOT_SUPPORTED)
 *   device.N.processes=RC          return code of the running-process calls
 *   device.N.process=PID:BYTES     one compute process (BYTES "na": NVML_VALUE_NOT_AVAILABLE)
 *   device.N.filler_processes=K    K more processes (pids 4000000+i, 1 MiB each)
 *   device.N.events=RC             return code of nvmlDeviceRegisterEvents
 *   xid=N:XID                      an Xid event on device N, delivered once, in file order
 *   memory_delay_ms=MS             each memory-info call takes MS longer (a slow driver, a
 *                                  loaded machine), outside the lock
 *
 * Without a script, nvmlInit answers NVML_ERROR_DRIVER_NOT_LOADED. Every call is appended
 * to $FAKE_NVML_LOG ("function return-code") when that is set.
 *
 * Built twice: as a current driver (r525+: _v2/_v3 entry points) and, with
 * FAKE_NVML_LEGACY, as an old one that exports only the unversioned v1 entry points.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef enum nvmlReturn_enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_OPERATING_SYSTEM = 17,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
  NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
  NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_DEPRECATED = 26,
  NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlEventSet_st* nvmlEventSet_t;

typedef struct nvmlMemory_st {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlMemory_v2_st {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;

#define NVML_STRUCT_VERSION(data, ver) \
  (unsigned int)(sizeof(nvml##data##_v##ver##_t) | ((unsigned int)(ver) << 24U))
#define nvmlMemory_v2 NVML_STRUCT_VERSION(Memory, 2)

typedef struct nvmlProcessInfo_v1_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct nvmlProcessInfo_v2_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t;
typedef nvmlProcessInfo_v2_t nvmlProcessInfo_t;

typedef struct nvmlEventData_st {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;

#define NVML_VALUE_NOT_AVAILABLE (~0ULL)
#define nvmlEventTypeXidCriticalError 0x0000000000000008LL

_Static_assert(sizeof(nvmlMemory_t) == 24, "nvmlMemory_t");
_Static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t");
_Static_assert(nvmlMemory_v2 == 0x02000028u, "nvmlMemory_v2");
_Static_assert(sizeof(nvmlProcessInfo_v1_t) == 16, "nvmlProcessInfo_v1_t");
_Static_assert(sizeof(nvmlProcessInfo_t) == 24, "nvmlProcessInfo_t");
_Static_assert(offsetof(nvmlEventData_t, eventData) == 16 && sizeof(nvmlEventData_t) == 32,
               "nvmlEventData_t");

/* ---- the scripted state ---------------------------------------------------------- */

#define MAX_DEVICES 8
#define MAX_PROCESSES 64
#define MAX_XIDS 64

struct fake_process {
  unsigned int pid;
  unsigned long long used;
};

struct nvmlDevice_st {
  int present;
  char name[96];
  char uuid[96];
  unsigned long long total, used, reserved;
  int memory_rc, processes_rc, events_rc;
  struct fake_process processes[MAX_PROCESSES];
  int process_count;
  int filler;
};

struct nvmlEventSet_st {
  int in_use;
  unsigned long long registered[MAX_DEVICES];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct nvmlDevice_st devices[MAX_DEVICES];
static struct nvmlEventSet_st event_sets[4];
static int device_count;
static int init_rc = NVML_ERROR_DRIVER_NOT_LOADED;
static char driver[80];
static struct {
  int device;
  unsigned long long xid;
} xids[MAX_XIDS];
static int xid_count, xids_delivered;
static int memory_delay_ms;
static int initialised;
static struct stat script_stat;
static int have_script;

static void logcall(const char* fn, int rc) {
  const char* path = getenv("FAKE_NVML_LOG");
  if (!path) return;
  FILE* f = fopen(path, "a");
  if (!f) return;
  fprintf(f, "%s %d\n", fn, rc);
  fclose(f);
}

#define RETURN(rc)            \
  do {                        \
    int rc_ = (rc);           \
    logcall(__func__, rc_);   \
    return (nvmlReturn_t)rc_; \
  } while (0)

static void parse_line(char* line) {
  char* eq = strchr(line, '=');
  if (!eq) return;
  *eq = '\0';
  const char* key = line;
  const char* value = eq + 1;
  if (strcmp(key, "init") == 0) {
    init_rc = atoi(value);
  } else if (strcmp(key, "memory_delay_ms") == 0) {
    memory_delay_ms = atoi(value);
  } else if (strcmp(key, "driver") == 0) {
    snprintf(driver, sizeof driver, "%s", value);
  } else if (strcmp(key, "xid") == 0) {
    int dev = 0;
    unsigned long long xid = 0;
    if (xid_count < MAX_XIDS && sscanf(value, "%d:%llu", &dev, &xid) == 2) {
      xids[xid_count].device = dev;
      xids[xid_count].xid = xid;
      ++xid_count;
    }
  } else if (strncmp(key, "device.", 7) == 0) {
    char* field = NULL;
    const long index = strtol(key + 7, &field, 10);
    if (index < 0 || index >= MAX_DEVICES || !field || *field != '.') return;
    ++field;
    struct nvmlDevice_st* d = &devices[index];
    d->present = 1;
    if (index + 1 > device_count) device_count = (int)index + 1;
    if (strcmp(field, "name") == 0)
      snprintf(d->name, sizeof d->name, "%s", value);
    else if (strcmp(field, "uuid") == 0)
      snprintf(d->uuid, sizeof d->uuid, "%s", value);
    else if (strcmp(field, "total") == 0)
      d->total = strtoull(value, NULL, 10);
    else if (strcmp(field, "used") == 0)
      d->used = strtoull(value, NULL, 10);
    else if (strcmp(field, "reserved") == 0)
      d->reserved = strtoull(value, NULL, 10);
    else if (strcmp(field, "memory") == 0)
      d->memory_rc = atoi(value);
    else if (strcmp(field, "processes") == 0)
      d->processes_rc = atoi(value);
    else if (strcmp(field, "events") == 0)
      d->events_rc = atoi(value);
    else if (strcmp(field, "filler_processes") == 0)
      d->filler = atoi(value);
    else if (strcmp(field, "process") == 0 && d->process_count < MAX_PROCESSES) {
      unsigned int pid = 0;
      char bytes[32] = "";
      if (sscanf(value, "%u:%31s", &pid, bytes) == 2) {
        d->processes[d->process_count].pid = pid;
        d->processes[d->process_count].used =
            strcmp(bytes, "na") == 0 ? NVML_VALUE_NOT_AVAILABLE : strtoull(bytes, NULL, 10);
        ++d->process_count;
      }
    }
  }
}

/* Re-reads the script when it changed (called with the lock held). */
static void reload(void) {
  const char* path = getenv("FAKE_NVML_SCRIPT");
  struct stat st;
  if (!path || stat(path, &st) != 0) {
    have_script = 0;
    init_rc = NVML_ERROR_DRIVER_NOT_LOADED;
    return;
  }
  if (have_script && st.st_ino == script_stat.st_ino && st.st_size == script_stat.st_size &&
      st.st_mtim.tv_sec == script_stat.st_mtim.tv_sec &&
      st.st_mtim.tv_nsec == script_stat.st_mtim.tv_nsec)
    return;
  FILE* f = fopen(path, "r");
  if (!f) return;
  script_stat = st;
  have_script = 1;
  memset(devices, 0, sizeof devices);
  device_count = 0;
  xid_count = 0;
  memory_delay_ms = 0;
  init_rc = NVML_SUCCESS;
  snprintf(driver, sizeof driver, "%s", "550.54.15");
  char line[512];
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = '\0';
    if (line[0] == '#' || line[0] == '\0') continue;
    parse_line(line);
  }
  fclose(f);
  /* Never deliver an event twice, even if the script is rewritten shorter. */
  if (xids_delivered > xid_count) xids_delivered = xid_count;
}

/* The scripted delay of a memory-info call, taken with the lock released. */
static void memory_delay(int ms) {
  if (ms <= 0) return;
  const struct timespec pause = {ms / 1000, (long)(ms % 1000) * 1000 * 1000};
  nanosleep(&pause, NULL);
}

static struct nvmlDevice_st* check_device(nvmlDevice_t device) {
  for (int i = 0; i < device_count; ++i)
    if (device == &devices[i] && devices[i].present) return device;
  return NULL;
}

static int process_total(const struct nvmlDevice_st* d) {
  return d->process_count + d->filler;
}

static void process_at(const struct nvmlDevice_st* d, int i, unsigned int* pid,
                       unsigned long long* used) {
  if (i < d->process_count) {
    *pid = d->processes[i].pid;
    *used = d->processes[i].used;
  } else {
    *pid = 4000000u + (unsigned int)(i - d->process_count);
    *used = 1024ull * 1024ull;
  }
}

/* ---- the API ------------------------------------------------------------------------ */

static nvmlReturn_t do_init(void) {
  pthread_mutex_lock(&lock);
  reload();
  const int rc = init_rc;
  if (rc == NVML_SUCCESS) ++initialised;
  pthread_mutex_unlock(&lock);
  return (nvmlReturn_t)rc;
}

EXPORT nvmlReturn_t nvmlInit(void) {
  RETURN(do_init());
}
#ifndef FAKE_NVML_LEGACY
EXPORT nvmlReturn_t nvmlInit_v2(void) {
  RETURN(do_init());
}
#endif

EXPORT nvmlReturn_t nvmlShutdown(void) {
  pthread_mutex_lock(&lock);
  const int rc = initialised > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
  if (initialised > 0) --initialised;
  pthread_mutex_unlock(&lock);
  RETURN(rc);
}

EXPORT const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
      return "Insufficient Permissions";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      return "Function Not Found";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
      return "Argument version mismatch";
    default:
      return "Unknown Error";
  }
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (!initialised) RETURN(NVML_ERROR_UNINITIALIZED);
  if (!version) RETURN(NVML_ERROR_INVALID_ARGUMENT);
  pthread_mutex_lock(&lock);
  int rc = NVML_SUCCESS;
  if (strlen(driver) + 1 > length)
    rc = NVML_ERROR_INSUFFICIENT_SIZE;
  else
    snprintf(version, length, "%s", driver);
  pthread_mutex_unlock(&lock);
  RETURN(rc);
}

static nvmlReturn_t get_count(unsigned int* count) {
  if (!initialised) return NVML_ERROR_UNINITIALIZED;
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  pthread_mutex_lock(&lock);
  reload();
  *count = (unsigned int)device_count;
  pthread_mutex_unlock(&lock);
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) {
  RETURN(get_count(count));
}
#ifndef FAKE_NVML_LEGACY
EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  RETURN(get_count(count));
}
#endif

static nvmlReturn_t get_handle(unsigned int index, nvmlDevice_t* device) {
  if (!initialised) return NVML_ERROR_UNINITIALIZED;
  if (!device || index >= (unsigned int)device_count) return NVML_ERROR_INVALID_ARGUMENT;
  *device = &devices[index];
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  RETURN(get_handle(index, device));
}
#ifndef FAKE_NVML_LEGACY
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  RETURN(get_handle(index, device));
}
#endif

static nvmlReturn_t copy_text(const char* text, char* out, unsigned int length) {
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  if (strlen(text) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  snprintf(out, length, "%s", text);
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  if (!initialised) RETURN(NVML_ERROR_UNINITIALIZED);
  pthread_mutex_lock(&lock);
  struct nvmlDevice_st* d = check_device(device);
  const int rc = d ? copy_text(d->name, name, length) : NVML_ERROR_INVALID_ARGUMENT;
  pthread_mutex_unlock(&lock);
  RETURN(rc);
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  if (!initialised) RETURN(NVML_ERROR_UNINITIALIZED);
  pthread_mutex_lock(&lock);
  struct nvmlDevice_st* d = check_device(device);
  const int rc = d ? copy_text(d->uuid, uuid, length) : NVML_ERROR_INVALID_ARGUMENT;
  pthread_mutex_unlock(&lock);
  RETURN(rc);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  if (!initialised) RETURN(NVML_ERROR_UNINITIALIZED);
  if (!memory) RETURN(NVML_ERROR_INVALID_ARGUMENT);
  pthread_mutex_lock(&lock);
  reload();
  struct nvmlDevice_st* d = check_device(device);
  int rc = d ? d->memory_rc : NVML_ERROR_INVALID_ARGUMENT;
  if (rc == NVML_SUCCESS) {
    /* v1 counts the reserved memory as used, as the real one does. */
    memory->total = d->total;
    memory->used = d->used + d->reserved;
    memory->free = d->total - memory->used;
  }
  const int delay_ms = memory_delay_ms;
  pthread_mutex_unlock(&lock);
  memory_delay(delay_ms);
  RETURN(rc);
}

#ifndef FAKE_NVML_LEGACY
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  if (!initialised) RETURN(NVML_ERROR_UNINITIALIZED);
  if (!memory) RETURN(NVML_ERROR_INVALID_ARGUMENT);
  if (memory->version != nvmlMemory_v2) RETURN(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  pthread_mutex_lock(&lock);
  reload();
  struct nvmlDevice_st* d = check_device(device);
  int rc = d ? d->memory_rc : NVML_ERROR_INVALID_ARGUMENT;
  if (rc == NVML_SUCCESS) {
    memory->total = d->total;
    memory->reserved = d->reserved;
    memory->used = d->used;
    memory->free = d->total - d->reserved - d->used;
  }
  const int delay_ms = memory_delay_ms;
  pthread_mutex_unlock(&lock);
  memory_delay(delay_ms);
  RETURN(rc);
}
#endif

/* The running-process calls of every version: same protocol, different element type. */
#define PROCESSES_BODY(element_type, fill_extra)              \
  if (!initialised) RETURN(NVML_ERROR_UNINITIALIZED);         \
  if (!infoCount) RETURN(NVML_ERROR_INVALID_ARGUMENT);        \
  pthread_mutex_lock(&lock);                                  \
  reload();                                                   \
  struct nvmlDevice_st* d = check_device(device);             \
  int rc = d ? d->processes_rc : NVML_ERROR_INVALID_ARGUMENT; \
  if (rc == NVML_SUCCESS) {                                   \
    const unsigned int n = (unsigned int)process_total(d);    \
    if (*infoCount < n) {                                     \
      rc = NVML_ERROR_INSUFFICIENT_SIZE;                      \
    } else if (n > 0 && !infos) {                             \
      rc = NVML_ERROR_INVALID_ARGUMENT;                       \
    } else {                                                  \
      for (unsigned int i = 0; i < n; ++i) {                  \
        element_type* e = &infos[i];                          \
        process_at(d, (int)i, &e->pid, &e->usedGpuMemory);    \
        fill_extra;                                           \
      }                                                       \
    }                                                         \
    *infoCount = n;                                           \
  }                                                           \
  pthread_mutex_unlock(&lock);                                \
  RETURN(rc);

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device,
                                                         unsigned int* infoCount,
                                                         nvmlProcessInfo_v1_t* infos){
    PROCESSES_BODY(nvmlProcessInfo_v1_t, (void)0)}
#ifndef FAKE_NVML_LEGACY
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device,
                                                            unsigned int* infoCount,
                                                            nvmlProcessInfo_v2_t* infos){
    PROCESSES_BODY(nvmlProcessInfo_v2_t, (e->gpuInstanceId = 0xFFFFFFFFu,
                                          e->computeInstanceId = 0xFFFFFFFFu))} EXPORT nvmlReturn_t
    nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* infoCount,
                                            nvmlProcessInfo_t* infos){
        PROCESSES_BODY(nvmlProcessInfo_t,
                       (e->gpuInstanceId = 0xFFFFFFFFu, e->computeInstanceId = 0xFFFFFFFFu))}
#endif

EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  if (!initialised) RETURN(NVML_ERROR_UNINITIALIZED);
  if (!set) RETURN(NVML_ERROR_INVALID_ARGUMENT);
  pthread_mutex_lock(&lock);
  int rc = NVML_ERROR_MEMORY;
  for (int i = 0; i < 4; ++i) {
    if (!event_sets[i].in_use) {
      memset(&event_sets[i], 0, sizeof event_sets[i]);
      event_sets[i].in_use = 1;
      *set = &event_sets[i];
      rc = NVML_SUCCESS;
      break;
    }
  }
  pthread_mutex_unlock(&lock);
  RETURN(rc);
}

EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  if (!set) RETURN(NVML_ERROR_INVALID_ARGUMENT);
  pthread_mutex_lock(&lock);
  set->in_use = 0;
  pthread_mutex_unlock(&lock);
  RETURN(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                             nvmlEventSet_t set) {
  if (!initialised) RETURN(NVML_ERROR_UNINITIALIZED);
  if (!set || !set->in_use) RETURN(NVML_ERROR_INVALID_ARGUMENT);
  pthread_mutex_lock(&lock);
  struct nvmlDevice_st* d = check_device(device);
  int rc = d ? d->events_rc : NVML_ERROR_INVALID_ARGUMENT;
  if (rc == NVML_SUCCESS) {
    if (eventTypes & ~(unsigned long long)nvmlEventTypeXidCriticalError)
      rc = NVML_ERROR_NOT_SUPPORTED;
    else
      set->registered[d - devices] |= eventTypes;
  }
  pthread_mutex_unlock(&lock);
  RETURN(rc);
}

EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device,
                                                     unsigned long long* types) {
  if (!initialised) RETURN(NVML_ERROR_UNINITIALIZED);
  if (!types || !check_device(device)) RETURN(NVML_ERROR_INVALID_ARGUMENT);
  *types = nvmlEventTypeXidCriticalError;
  RETURN(NVML_SUCCESS);
}

static nvmlReturn_t wait_event(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeoutms,
                               size_t data_size) {
  if (!initialised) return NVML_ERROR_UNINITIALIZED;
  if (!set || !data) return NVML_ERROR_INVALID_ARGUMENT;
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    pthread_mutex_lock(&lock);
    reload();
    if (xids_delivered < xid_count) {
      const int dev = xids[xids_delivered].device;
      if (dev >= 0 && dev < MAX_DEVICES &&
          (set->registered[dev] & (unsigned long long)nvmlEventTypeXidCriticalError)) {
        nvmlEventData_t event;
        memset(&event, 0, sizeof event);
        event.device = &devices[dev];
        event.eventType = nvmlEventTypeXidCriticalError;
        event.eventData = xids[xids_delivered].xid;
        event.gpuInstanceId = 0xFFFFFFFFu;
        event.computeInstanceId = 0xFFFFFFFFu;
        memcpy(data, &event, data_size);
        ++xids_delivered;
        pthread_mutex_unlock(&lock);
        return NVML_SUCCESS;
      }
      ++xids_delivered; /* for a device not registered in this set: never seen */
    }
    pthread_mutex_unlock(&lock);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    const long long elapsed_ms =
        (now.tv_sec - start.tv_sec) * 1000LL + (now.tv_nsec - start.tv_nsec) / 1000000LL;
    if (elapsed_ms >= timeoutms) return NVML_ERROR_TIMEOUT;
    const struct timespec step = {0, 10 * 1000 * 1000};
    nanosleep(&step, NULL);
  }
}

/* Before MIG (r450) the event data ended after eventData: the v1 call writes 24 bytes. */
EXPORT nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t* data,
                                     unsigned int timeoutms) {
  RETURN(wait_event(set, data, timeoutms, offsetof(nvmlEventData_t, gpuInstanceId)));
}
#ifndef FAKE_NVML_LEGACY
EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                        unsigned int timeoutms) {
  RETURN(wait_event(set, data, timeoutms, sizeof *data));
}
#endif
