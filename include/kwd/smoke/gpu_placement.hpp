#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kwd::smoke {

// A GPU `smoke -j auto` may hand to a kernel, and the memory it may fill there; or one of a
// CTest resource spec (--resource-spec-file), which has slots instead.
struct SmokeGpu {
  unsigned index = 0;  // NVML's index
  std::string uuid;    // "GPU-8d6f...": what the kernel is given as CUDA_VISIBLE_DEVICES
  std::string name;
  std::int64_t budget = 0;  // bytes: free when smoke started, less a CUDA context's reserve
  // From a resource spec: its id, and how many notebooks may run on it at once (each takes
  // one slot); placement counts slots and not memory, and the kernel is told the id through
  // CTEST_RESOURCE_GROUP_* alone, as CTest tells a test. Empty id: an NVML GPU.
  std::string ctest_id;
  std::size_t slots = 0;
};

// Each CUDA context takes memory of its own beyond what the notebook allocates.
inline constexpr std::int64_t kCudaContextReserve = std::int64_t{512} << 20;

// Which of the devices (by NVML index, with their UUIDs) a CUDA_VISIBLE_DEVICES value leaves
// visible, in its order: a list of indices or UUIDs ("GPU-..." whole or a unique prefix), as
// the CUDA runtime reads it; the list ends at the first entry that names no device (as CUDA's
// does), and an empty value hides every device. nullopt for `mask`: every device.
std::vector<std::size_t> visible_devices(const std::vector<std::string>& uuids,
                                         std::optional<std::string_view> mask);

// The GPUs of this job: NVML's (from `nvml_library`, empty: the system's), narrowed by the
// inherited CUDA_VISIBLE_DEVICES. Empty, with `said` saying why in words, where there are
// none to place kernels on (no driver, a mask that hides them all).
std::vector<SmokeGpu> usable_gpus(const std::string& nvml_library, std::string& said);

// Which GPU a notebook needing `need` bytes goes to, given what each holds for the
// notebooks running there (`held`, by index into `gpus`): the one whose free memory fits it
// most tightly (best fit); nullopt if none fits. A notebook of unknown GPU memory (`need`
// nullopt) gets the one with the most free. GPUs of a resource spec go by `placed` (how many
// run on each): the one with the most slots free, nullopt when every slot is taken.
std::optional<std::size_t> place_on_gpu(const std::vector<SmokeGpu>& gpus,
                                        const std::vector<std::int64_t>& held,
                                        std::optional<std::int64_t> need,
                                        const std::vector<std::size_t>& placed = {});

// What the kernel of a notebook placed on `gpu` is started with: only that GPU visible
// (CUDA_VISIBLE_DEVICES, and CTest's resource group variables, for suites written for
// CTest's GPU allocation), and JAX and TensorFlow told not to take the whole card, which they
// would share with others.
std::vector<std::string> gpu_environment(const SmokeGpu& gpu);

}  // namespace kwd::smoke
