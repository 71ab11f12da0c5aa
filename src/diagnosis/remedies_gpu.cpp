#include <algorithm>
#include <map>

#include "kwd/diagnosis/advisor.hpp"

namespace kwd::diagnosis {
void Advisor::other_gpu_processes() {
  if (!in_.gpu_contention || in_.gpu_contention->others.empty()) return;
  const auto& c = *in_.gpu_contention;
  std::string who;
  std::set<std::string> frameworks;
  bool unknown = false;
  for (std::size_t i = 0; i < c.others.size() && i < 3; ++i) {
    const auto& o = c.others[i];
    who += (who.empty() ? "" : ", ") + o.label(60);
    who += " " + bytes(static_cast<double>(o.bytes));
    frameworks.insert(o.frameworks.begin(), o.frameworks.end());
    unknown = unknown || o.frameworks.empty();
  }
  std::string text = "Stop or restart the other processes holding GPU memory: " + who + ".";
  const bool all = unknown;  // what they run is not known: say it for each framework
  // A framework the kernel itself is advised about gets a pointer to that advice, not the
  // settings twice (it may come before or after this one).
  const auto as_for_kernel = [](const char* what) {
    return std::string(": the ") + what +
           " setting advised for this kernel in another item applies to it too.";
  };
  if (all || frameworks.contains("jax"))
    text += std::string(all ? " If one is JAX" : " For the JAX one") +
            (jax_preallocation_advised()
                 ? as_for_kernel("preallocation")
                 : ": start it with XLA_PYTHON_CLIENT_PREALLOCATE=false (allocate on demand) or "
                   "XLA_PYTHON_CLIENT_MEM_FRACTION=.3 (a smaller share), set before jax is "
                   "imported.");
  if (all || frameworks.contains("tensorflow"))
    text += std::string(all ? " If one is TensorFlow" : " For the TensorFlow one") +
            (tf_growth_advised() ? as_for_kernel("memory-growth")
                                 : ": tf.config.experimental.set_memory_growth(gpu, True) or "
                                   "TF_FORCE_GPU_ALLOW_GROWTH=true, so it maps memory as it "
                                   "needs it.");
  if (all || frameworks.contains("torch"))
    text += std::string(all ? " If one is PyTorch" : " For the PyTorch one") +
            ": torch.cuda.empty_cache() in it hands its cached blocks back" +
            (torch_segments_advised()
                 ? "; the allocator setting advised for this kernel applies to it too."
                 : ", and PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
                   "keeps its cache from fragmenting.");
  std::string why = std::to_string(c.others.size()) + " other process(es) held " +
                    bytes(static_cast<double>(c.held)) +
                    " of GPU memory when the kernel's allocation failed";
  if (c.capacity) why += ", of the device's " + bytes(static_cast<double>(*c.capacity));
  add("gpu.other_processes", text, why + ".");
}

void Advisor::gpu_oom() {
  // A request larger than the whole device: no setting, cache or other process is the fix.
  if (in_.gpu_contention && in_.gpu_contention->request_exceeds_device()) {
    const auto& c = *in_.gpu_contention;
    add("gpu.request_exceeds_device",
        "Split the work: the failed allocation asked for " +
            bytes(static_cast<double>(*c.requested)) + ", more than the whole device holds (" +
            bytes(static_cast<double>(*c.one_device)) +
            "), so no memory setting or restart makes room. Process it in smaller chunks or "
            "batches, shard it across devices, or keep it in host memory.",
        std::string("The framework's message names the request; ") +
            (c.one_device_from_message ? "it gives the device's total memory too."
                                       : "NVML gives the total memory of the largest device the "
                                         "kernel used (or of all, when it was seen on none)."));
    return;
  }
  // Others holding most of the device: that is the fix, before anything in the kernel.
  if (in_.gpu_contention && in_.gpu_contention->significant()) other_gpu_processes();
  const bool mps = hit_id("pytorch.mps_out_of_memory");
  const bool mlx = hit_family("mlx");
  // AMD (ROCm/HIP) and Intel (XPU, Level Zero) devices: the frameworks' own words say which.
  const bool rocm = hit_family("rocm");
  const bool xpu = hit_family("xpu");
  if (tf_growth_advised())
    add("tensorflow.memory_growth",
        "Let TensorFlow allocate GPU memory on demand: call "
        "tf.config.experimental.set_memory_growth(gpu, True) for every GPU before any op runs, "
        "or start the kernel with TF_FORCE_GPU_ALLOW_GROWTH=true; to share the device, cap it "
        "with tf.config.set_logical_device_configuration(gpu, "
        "[tf.config.LogicalDeviceConfiguration(memory_limit=...)]).",
        "TensorFlow is loaded and TF_FORCE_GPU_ALLOW_GROWTH is not set: by default TensorFlow "
        "maps almost all free device memory when it starts, leaving none for cuDNN, cuBLAS or "
        "another process.");
  act("tensorflow.memory_growth", setting_cell("TF_FORCE_GPU_ALLOW_GROWTH", "true", "TensorFlow"));
  if (pytorch() && !mps && !xpu) {
    add("torch.smaller_batch",
        "Lower the batch size (or use torch.autocast mixed precision / gradient checkpointing); "
        "torch.cuda.empty_cache() only returns cached blocks, it cannot free live tensors.",
        "PyTorch is loaded; its CUDA allocator ran out of device memory.");
    if (rocm && !in_.env("PYTORCH_HIP_ALLOC_CONF") && !in_.env("PYTORCH_CUDA_ALLOC_CONF") &&
        !in_.env("PYTORCH_ALLOC_CONF"))
      add("torch.hip_expandable_segments",
          "Start the kernel with PYTORCH_HIP_ALLOC_CONF=expandable_segments:True (the ROCm "
          "build's name for the caching allocator's settings; newer builds also read the "
          "PYTORCH_CUDA_ALLOC_CONF their message names) to reduce fragmentation.",
          "The allocation failed on an AMD GPU under ROCm (HIP) and no allocator setting is "
          "in the kernel's environment; when 'reserved but unallocated' memory is large, "
          "fragmentation is what fails the allocation.");
    act("torch.hip_expandable_segments",
        setting_cell("PYTORCH_HIP_ALLOC_CONF", "expandable_segments:True", "PyTorch"));
    if (torch_segments_advised() && !rocm)
      add("torch.expandable_segments",
          "Start the kernel with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to reduce "
          "fragmentation of the caching allocator.",
          "PYTORCH_CUDA_ALLOC_CONF is not set; when 'reserved but unallocated' memory is large, "
          "fragmentation is what fails the allocation.");
    act("torch.expandable_segments",
        setting_cell("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", "PyTorch"));
  }
  if (jax_preallocation_advised())
    add("jax.preallocate",
        "Start the kernel with XLA_PYTHON_CLIENT_PREALLOCATE=false (or "
        "XLA_PYTHON_CLIENT_MEM_FRACTION=.5) so JAX does not reserve most of the GPU up front; "
        "it must be set before jax is imported.",
        "JAX/jaxlib is loaded and XLA_PYTHON_CLIENT_PREALLOCATE is not false: JAX reserves 75% "
        "of device memory at first use.");
  act("jax.preallocate", setting_cell("XLA_PYTHON_CLIENT_PREALLOCATE", "false", "JAX"));
  if (rocm && !env_is("HSA_XNACK", {"1"}))
    add("rocm.xnack",
        "If the program uses managed (unified) memory, such as hipMallocManaged or a "
        "framework's unified-memory option, start the kernel with HSA_XNACK=1 on a GPU that "
        "supports it (MI200, MI300): pages then move on demand instead of the allocation "
        "failing. It does not enlarge ordinary device allocations.",
        "ROCm runs without XNACK unless HSA_XNACK=1 is set; without it, managed memory cannot "
        "be oversubscribed.");
  if (xpu)
    add("xpu.smaller_batch",
        "Lower the batch size or the model's precision on the Intel GPU; "
        "torch.xpu.empty_cache() hands PyTorch's cached blocks back but cannot free live "
        "tensors. After a Level Zero error (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY) restart the "
        "kernel before retrying: the device may be left unusable.",
        "The XPU (oneAPI/Level Zero) runtime ran out of device memory; on an integrated GPU "
        "that memory is the machine's own.");
  if (mps)
    add("mps.batch",
        "Reduce the batch size or model precision on the MPS device. "
        "PYTORCH_MPS_HIGH_WATERMARK_RATIO can raise PyTorch's cap, but 0.0 (no cap) may freeze "
        "the whole Mac when unified memory runs out.",
        "On Apple silicon the GPU shares memory with the CPU and every other app.");
  if (mlx)
    add("mlx.memory_limit",
        "Shrink MLX's working set (smaller arrays, quantised weights) and bound its buffer cache "
        "with mx.metal.set_cache_limit(); close other apps using unified memory.",
        "MLX allocations failed in Metal, which aborts the process.");
  other_gpu_processes();
  // The framework's own advice already says how to shrink what it holds.
  if (given("torch.smaller_batch") || given("mps.batch") || given("mlx.memory_limit") ||
      given("xpu.smaller_batch"))
    return;
  add("gpu.smaller_model",
      "Reduce what lives on the device at once: smaller batches or inputs, mixed precision, "
      "and delete models/tensors from earlier cells before building new ones.",
      "The device had no room for the next allocation.");
}

void Advisor::gpu_fault() {
  if (!env_is("CUDA_LAUNCH_BLOCKING", {"1"}))
    add("cuda.launch_blocking",
        "Restart the kernel with CUDA_LAUNCH_BLOCKING=1 in its environment and run the cell "
        "again: the error will then name the operation that faulted.",
        "CUDA reports kernel failures asynchronously, so the Python line in the traceback can "
        "be a later, innocent call.");
  act("cuda.launch_blocking", setting_cell("CUDA_LAUNCH_BLOCKING", "1", "CUDA"));
  // The first Xid of the death's own time; one the kernel survived advises nothing.
  if (!in_.xid_events.empty()) {
    const auto xid = in_.xid_events.front().xid;
    const bool hardware = xid == 79 || xid == 48 || xid == 74 || xid == 63 || xid == 64 ||
                          xid == 92 || xid == 94 || xid == 95;
    add("gpu.xid",
        hardware ? "Xid " + std::to_string(xid) +
                       " points at the hardware: check power, cooling, PCIe seating and ECC "
                       "(nvidia-smi -q) before debugging the program."
                 : "Xid " + std::to_string(xid) +
                       " usually means a GPU kernel accessed memory out of bounds: check "
                       "indices and custom CUDA ops; update the driver if it recurs.",
        "The NVIDIA driver logged Xid " + std::to_string(xid) + " for the kernel.");
  }
  add("cuda.restart",
      "Restart the kernel before retrying: a CUDA context is unusable after an illegal access "
      "or a device-side assertion.",
      "CUDA marks the context as failed; every later call in this process fails too.");
}

}  // namespace kwd::diagnosis
