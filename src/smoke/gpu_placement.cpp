#include "kwd/smoke/gpu_placement.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "kwd/probes/nvml/nvml_library.hpp"

namespace kwd::smoke {

std::vector<std::size_t> visible_devices(const std::vector<std::string>& uuids,
                                         std::optional<std::string_view> mask) {
  std::vector<std::size_t> out;
  if (!mask) {
    for (std::size_t i = 0; i < uuids.size(); ++i)
      out.push_back(i);
    return out;
  }
  std::string_view rest = *mask;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    std::string_view entry = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    while (!entry.empty() && entry.front() == ' ')
      entry.remove_prefix(1);
    while (!entry.empty() && entry.back() == ' ')
      entry.remove_suffix(1);
    std::optional<std::size_t> found;
    std::size_t index = 0;
    const auto [end, error] = std::from_chars(entry.data(), entry.data() + entry.size(), index);
    if (!entry.empty() && error == std::errc() && end == entry.data() + entry.size()) {
      if (index < uuids.size()) found = index;
    } else if (entry.starts_with("GPU-")) {
      for (std::size_t i = 0; i < uuids.size(); ++i)
        if (uuids[i].starts_with(entry)) {
          if (found) {  // a prefix of two: CUDA refuses it as it does any unknown entry
            found.reset();
            break;
          }
          found = i;
        }
    }
    if (!found || std::find(out.begin(), out.end(), *found) != out.end()) break;
    out.push_back(*found);
  }
  return out;
}

std::vector<SmokeGpu> usable_gpus(const std::string& nvml_library, std::string& said) {
  std::string problem;
  const auto nvml = probes::nvml::NvmlLibrary::load(nvml_library, problem);
  if (!nvml) {
    said = problem;
    return {};
  }
  const auto count = nvml->device_count();
  if (!count.ok()) {
    said = "NVML could not count the GPUs: " + nvml->error_string(count.code);
    return {};
  }
  std::vector<SmokeGpu> all;
  std::vector<std::string> uuids;
  for (unsigned i = 0; i < count.value; ++i) {
    const auto device = nvml->device(i);
    if (!device.ok()) continue;
    SmokeGpu gpu;
    gpu.index = i;
    if (const auto uuid = nvml->uuid(device.value); uuid.ok()) gpu.uuid = uuid.value;
    if (const auto name = nvml->name(device.value); name.ok()) gpu.name = name.value;
    const auto memory = nvml->memory(device.value);
    if (gpu.uuid.empty() || !memory.ok()) continue;  // nothing to hand over, or to pack by
    gpu.budget = std::max<std::int64_t>(
        static_cast<std::int64_t>(memory.value.free) - kCudaContextReserve, 0);
    uuids.push_back(gpu.uuid);
    all.push_back(std::move(gpu));
  }
  const char* mask = std::getenv("CUDA_VISIBLE_DEVICES");
  std::vector<SmokeGpu> out;
  for (std::size_t i :
       visible_devices(uuids, mask ? std::optional<std::string_view>(mask) : std::nullopt))
    out.push_back(all[i]);
  if (out.empty())
    said = all.empty() ? "NVML lists no GPU whose memory it can read"
                       : "CUDA_VISIBLE_DEVICES hides every GPU";
  return out;
}

std::optional<std::size_t> place_on_gpu(const std::vector<SmokeGpu>& gpus,
                                        const std::vector<std::int64_t>& held,
                                        std::optional<std::int64_t> need,
                                        const std::vector<std::size_t>& placed) {
  std::optional<std::size_t> best;
  std::int64_t best_left = 0;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    if (gpus[i].slots > 0) {
      const std::size_t taken = i < placed.size() ? placed[i] : 0;
      const auto free_slots =
          static_cast<std::int64_t>(gpus[i].slots) - static_cast<std::int64_t>(taken);
      if (free_slots > 0 && (!best || free_slots > best_left)) {
        best = i;
        best_left = free_slots;
      }
      continue;
    }
    const std::int64_t free = gpus[i].budget - (i < held.size() ? held[i] : 0);
    if (need) {
      const std::int64_t left = free - *need;
      if (left >= 0 && (!best || left < best_left)) {
        best = i;
        best_left = left;
      }
    } else if (!best || free > best_left) {
      best = i;
      best_left = free;
    }
  }
  return best;
}

std::vector<std::string> gpu_environment(const SmokeGpu& gpu) {
  const bool from_spec = !gpu.ctest_id.empty();
  std::vector<std::string> env;
  // An NVML GPU is the only one the kernel sees, so its id is 0: suites written for CTest
  // use the id as the CUDA ordinal (torch.cuda.set_device(id)), and under the mask the GPU's
  // NVML index would name a device that is not there. One of a resource spec is not masked,
  // as CTest masks nothing: its id is the suite's own name for the device.
  if (!from_spec) env.push_back("CUDA_VISIBLE_DEVICES=" + gpu.uuid);
  // CTest's resource allocation: one group holding one slot of this GPU.
  env.insert(env.end(),
             {"CTEST_RESOURCE_GROUP_COUNT=1", "CTEST_RESOURCE_GROUP_0=gpus",
              "CTEST_RESOURCE_GROUP_0_GPUS=id:" + (from_spec ? gpu.ctest_id : "0") + ",slots:1",
              // JAX takes 75 % of the card at its first use, TensorFlow all of it,
              // unless told.
              "XLA_PYTHON_CLIENT_PREALLOCATE=false", "TF_FORCE_GPU_ALLOW_GROWTH=true"});
  return env;
}

}  // namespace kwd::smoke
