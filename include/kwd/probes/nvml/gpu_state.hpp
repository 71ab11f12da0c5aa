#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kwd/probes/nvml/nvml_library.hpp"

namespace kwd::probes::nvml {

// What NVML said about one device at the last GPU sample.
struct GpuDeviceState {
  unsigned int index = 0;
  std::string name;
  std::string uuid;
  std::optional<DeviceMemory> memory;  // nullopt: NVML could not say (see problems)
  bool processes_known = false;
  std::vector<GpuProcess> processes;  // every compute process on the device, ours or not
};

// Everything the NVML worker publishes for the event loop.
struct GpuState {
  enum class Phase { starting, running, unavailable };
  Phase phase = Phase::starting;
  std::string reason;  // why unavailable, or what is read and how
  std::string driver_version;
  std::vector<GpuDeviceState> devices;
  std::vector<std::string> problems;  // each distinct problem once, in order of appearance
  std::int64_t sampled_at_ms = 0;     // wall clock when the last device sample began
  // A sample has read every device's memory and processes: NVML worked. A device that never
  // answers (NOT_SUPPORTED from the start) is how the machine is, not a failure.
  bool sampled_whole = false;
  // Wall clock of the first sample that failed after a whole one (the driver lost the GPU,
  // was unloaded, stopped answering); 0: none.
  std::int64_t failing_since_ms = 0;
};

// An Xid (nvmlEventTypeXidCriticalError) as the worker received it. NVML does not say
// which process caused it, so the processes on that device at that moment are kept.
struct XidEvent {
  std::int64_t t_ms = 0;  // wall clock when the worker took the event
  // The last sample_and_wait request answered when it was taken: a cell's end that asked for
  // a request above this one had not been answered yet, so the fault came before that
  // answer (and is counted as that cell's, whose end it followed by milliseconds at most).
  std::uint64_t served_before = 0;
  unsigned long long xid = 0;
  unsigned int device = 0;
  std::vector<unsigned int> pids_on_device;
};

}  // namespace kwd::probes::nvml
