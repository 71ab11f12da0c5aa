#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include "kwd/diagnosis/findings.hpp"
#include "kwd/diagnosis/shared_memory_remedies.hpp"
#include "kwd/util/size_parse.hpp"

namespace kwd::diagnosis {
namespace {

using nlohmann::json;

std::string bytes(double b) {
  return util::format_bytes(b);
}

// Signatures whose remedy says again what a remedy of the cause's own already says. When both
// apply, the signature's public source joins that remedy's reasons instead of a second item in
// other words (the reader would try the same fix twice).
const std::map<std::string_view, std::string_view> kRestatedBy{
    {"pytorch.cuda_out_of_memory", "torch.smaller_batch"},
    {"pytorch.mps_out_of_memory", "mps.batch"},
    {"tensorflow.gpu_tensor_oom", "tensorflow.memory_growth"},
    {"cudnn.handle_internal_error", "tensorflow.memory_growth"},
    {"xla.resource_exhausted", "jax.preallocate"},
    {"xla.bfc_allocator_out_of_memory", "gpu.smaller_model"},
    {"mlx.metal_command_buffer_oom", "mlx.memory_limit"},
    {"cuda.driver_out_of_memory", "gpu.other_processes"},
    {"cublas.alloc_failed", "torch.smaller_batch"},
    {"cuda.illegal_address", "cuda.launch_blocking"},
    {"nvidia.xid", "gpu.xid"},
    {"python.faulthandler_fatal_signal", "native.check_call"},
    {"python.faulthandler_abort", "abort.read_message"},
    {"cxx.terminate_uncaught", "abort.read_message"},
};

class Advisor {
 public:
  Advisor(const Finding& finding, const DiagnosisInput& input)
      : f_(finding), in_(input), v_(input.view) {}

  std::vector<Remedy> run() {
    using enum CauseId;
    const auto c = f_.cause;
    if (c == oom_killed_cgroup || c == oom_killed_system) oom();
    if (c == gpu_out_of_memory) gpu_oom();
    if (c == gpu_driver_fault) gpu_fault();
    if (c == shared_memory_full) shared_memory_advice();
    if (c == cpu_unsupported) cpu_advice();
    if (c == native_crash) native_crash_advice();
    if (c == abort) aborted();
    if (c == killed) killed_advice();
    if (c == exited_with_error || c == exited) exited_advice();
    if (c == hang) hang_advice();
    signatures();
    incompatibilities();
    if (out_.empty() || c == unknown) unknown_advice();
    return std::move(out_);
  }

 private:
  const Finding& f_;
  const DiagnosisInput& in_;
  const ReportView& v_;
  std::vector<Remedy> out_;
  std::set<std::string> ids_;

  void add(const std::string& id, const std::string& text, const std::string& why) {
    if (ids_.insert(id).second) out_.push_back({id, text, why});
  }
  void add(const Remedy& r) { add(r.id, r.text, r.why); }

  Remedy* given(std::string_view id) {
    const auto it =
        std::find_if(out_.begin(), out_.end(), [&](const Remedy& r) { return r.id == id; });
    return it == out_.end() ? nullptr : &*it;
  }

  // What this kernel is told to change in its own framework's allocator settings (the advice
  // for other processes on the device then points at it instead of naming the settings again).
  [[nodiscard]] bool tf_growth_advised() const {
    return tensorflow() && !hit_id("pytorch.mps_out_of_memory") &&
           !env_is("TF_FORCE_GPU_ALLOW_GROWTH", {"true", "1"});
  }
  [[nodiscard]] bool jax_preallocation_advised() const {
    return jax() && !env_is("XLA_PYTHON_CLIENT_PREALLOCATE", {"false", "0"});
  }
  // A signature whose remedy is a setting the kernel's environment already has.
  [[nodiscard]] bool setting_already_applied(const std::string& signature_id) const {
    if (signature_id == "cuda.illegal_address") return env_is("CUDA_LAUNCH_BLOCKING", {"1"});
    if (signature_id == "xla.resource_exhausted")
      return env_is("XLA_PYTHON_CLIENT_PREALLOCATE", {"false", "0"});
    if (signature_id == "tensorflow.gpu_tensor_oom" ||
        signature_id == "cudnn.handle_internal_error")
      return env_is("TF_FORCE_GPU_ALLOW_GROWTH", {"true", "1"});
    return false;
  }
  [[nodiscard]] bool torch_segments_advised() const {
    return pytorch() && !hit_id("pytorch.mps_out_of_memory") && !in_.env("PYTORCH_CUDA_ALLOC_CONF");
  }

  [[nodiscard]] bool env_is(const std::string& name,
                            std::initializer_list<const char*> values) const {
    const auto value = in_.env(name);
    if (!value) return false;
    std::string lower = *value;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    return std::any_of(values.begin(), values.end(), [&](const char* v) { return lower == v; });
  }

  [[nodiscard]] bool tensorflow() const {
    return in_.loaded("tensorflow") || hit_family("tensorflow");
  }
  [[nodiscard]] bool pytorch() const { return in_.loaded("torch") || hit_family("pytorch"); }
  [[nodiscard]] bool jax() const {
    return in_.loaded("jax") || in_.loaded("jaxlib") || hit_family("jax");
  }
  [[nodiscard]] bool hit_family(const std::string& family) const {
    return std::any_of(in_.hits.begin(), in_.hits.end(),
                       [&](const auto& h) { return h.signature->family == family; });
  }
  [[nodiscard]] bool hit_id(const std::string& id) const {
    return std::any_of(in_.hits.begin(), in_.hits.end(),
                       [&](const auto& h) { return h.signature->id == id; });
  }

  [[nodiscard]] std::string growth_note() const {
    const auto slope = v_.number("/memory/trend/rss/slope_60s");
    if (!slope || *slope <= 0) return "";
    return "; RSS was growing by " + bytes(*slope) + "/s over the last minute";
  }

  void working_set(const std::string& why_prefix) {
    std::string why = why_prefix;
    if (auto peak = v_.integer("/memory/peak/rss"))
      why += (why.empty() ? "" : "; ") + std::string("the kernel's processes peaked at ") +
             bytes(static_cast<double>(*peak)) + " RSS";
    why += growth_note();
    add("oom.smaller_working_set",
        "Hold less in memory at once: read and process the data in chunks (pandas chunksize, "
        "generators, tf.data or a DataLoader), use smaller dtypes (float32, category), and del "
        "large intermediates you no longer need.",
        why.empty() ? "The kernel needed more memory than it could get." : why);
  }

  void framework_host_memory() {
    if (tensorflow()) {
      add("tensorflow.release_tensors",
          "Keep only what you need of each step: a number (float(loss), .numpy() of a small "
          "result) rather than the eager tensor, del large tensors, and wrap the step in "
          "@tf.function so its intermediates live only inside the graph.",
          "TensorFlow is loaded in the kernel; an eager tensor holds its memory for as long as "
          "anything refers to it (a list, a history, IPython's Out[]).");
      if (keras_in_use())
        add("tensorflow.clear_session",
            "Between experiments call keras.backend.clear_session() and del the old models "
            "(or keep their scores, not the models); feed training from a tf.data pipeline "
            "instead of whole NumPy arrays.",
            "The notebook's cells use Keras; every model built without clear_session() stays "
            "referenced by Keras's global state, with its weights.");
    }
    if (pytorch()) {
      add("torch.release_tensors",
          "del tensors you no longer need (and their references in lists, dicts and Out[]); "
          "collect numbers with .item() or .detach().cpu() instead of keeping the tensors, "
          "then gc.collect().",
          "PyTorch is loaded in the kernel; a tensor holds its memory for as long as anything "
          "refers to it.");
      add("torch.no_grad",
          "Run evaluation under torch.no_grad() (or torch.inference_mode()) and keep results as "
          ".item()/.cpu() values rather than tensors that carry autograd history.",
          "PyTorch is loaded in the kernel; tensors that require grad keep every intermediate "
          "activation alive.");
    }
  }

  // Keras is pure Python (nothing of it shows in the memory maps): the notebook's own code
  // says whether it is used.
  [[nodiscard]] bool keras_in_use() const {
    if (in_.loaded("keras")) return true;
    const auto mentions = [](const std::optional<std::string>& code) {
      return code && code->find("keras") != std::string::npos;
    };
    if (mentions(v_.text("/execution/cell_in_flight/code"))) return true;
    for (const auto& c : v_.array("/execution/last_cells"))
      if (mentions(ReportView(c).text("/code"))) return true;
    return false;
  }

  // Who else held the cgroup's memory: stopping them is the first fix.
  void cgroup_neighbours() {
    std::string who;
    int n = 0;
    for (const auto& p : v_.array("/cgroup/other_processes")) {
      const ReportView proc(p);
      const auto rss = proc.integer("/rss").value_or(0);
      if (rss <= 0 || n++ >= 3) continue;
      who += (who.empty() ? "" : ", ") + std::string("pid ") +
             std::to_string(proc.integer("/pid").value_or(0));
      if (auto cmd = proc.text("/command_line"); cmd && !cmd->empty())
        who += " (" + cmd->substr(0, 60) + ")";
      who += " " + bytes(static_cast<double>(rss));
    }
    if (n == 0) return;
    add("oom.other_processes_in_cgroup",
        "Stop or restart the other processes in the kernel's cgroup, or move them out of it: " +
            who + ". The limit counts their memory as well as the kernel's.",
        std::to_string(n) +
            " process(es) that are not the kernel's shared its memory cgroup when the OOM killer "
            "fired.");
  }

  void oom() {
    if (f_.cause == CauseId::oom_killed_cgroup) cgroup_neighbours();
    if (f_.cause == CauseId::oom_killed_cgroup && v_.flag("/cgroup/created_by_watchdog")) {
      watchdog_limit();
    } else if (f_.cause == CauseId::oom_killed_cgroup) {
      std::string limit = "its limit";
      if (auto l = v_.integer("/cgroup/limit"); l && *l > 0) limit = bytes(static_cast<double>(*l));
      add("oom.raise_cgroup_limit",
          "Give the kernel more memory: raise the container/cgroup memory limit (now " + limit +
              "), e.g. the Docker --memory / Kubernetes resources.limits.memory / systemd "
              "MemoryMax setting, or run the notebook where more memory is available.",
          "The cgroup's OOM killer fired: the kernel's processes together reached " + limit + ".");
    } else {
      std::string why =
          "The whole machine ran out of memory, so the kernel OOM killer chose a process.";
      if (auto avail = v_.integer("/system_memory/mem_available"))
        why += " MemAvailable was " + bytes(static_cast<double>(*avail)) + " at the end.";
      add("oom.free_system_memory",
          "Shut down other kernels and memory-hungry programs, or add memory/swap; the OOM "
          "killer picks the largest process, which is usually the notebook.",
          why);
    }
    working_set("");
    framework_host_memory();
  }

  // A size as --memory-limit takes it: "512M", "3G".
  static std::string option_size(std::int64_t b) {
    constexpr std::int64_t MiB = 1024 * 1024, GiB = 1024 * MiB;
    if (b >= GiB && b % GiB == 0) return std::to_string(b / GiB) + "G";
    return std::to_string((b + MiB - 1) / MiB) + "M";
  }

  void watchdog_limit() {
    const auto l = v_.integer("/cgroup/limit").value_or(0);
    const std::string now = l > 0 ? option_size(l) : "N";
    const std::string more = l > 0 ? option_size(2 * l) : "MORE";
    const std::string why = "The limit was kernel-watchdog's own (--memory-limit=" + now +
                            "), in a cgroup that held this kernel alone; the kernel needed more.";
    if (v_.text("/watchdog/mode").value_or("") == "smoke") {
      add("oom.raise_watchdog_limit",
          "Raise the per-notebook limit: `kernel-watchdog smoke --memory-limit=" + more +
              " ...` (it is " + now + " now), or leave the option out to run without one.",
          why);
      return;
    }
    add("oom.raise_watchdog_limit",
        "Raise the limit in the kernelspec that starts this kernel: its kernel.json argv passes "
        "--memory-limit=" +
            now +
            " to `kernel-watchdog run` (`jupyter kernelspec list` shows where it is); "
            "change it there, or wrap the kernel again with `kernel-watchdog kernelspec wrap "
            "NAME --run-option=--memory-limit=" +
            more + "`. Without the option the kernel runs with no limit of the watchdog's.",
        why);
  }

  // The processes that held the device besides the kernel: stop them, or make them share.
  void other_gpu_processes() {
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

  void gpu_oom() {
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
    if (pytorch() && !mps) {
      add("torch.smaller_batch",
          "Lower the batch size (or use torch.autocast mixed precision / gradient checkpointing); "
          "torch.cuda.empty_cache() only returns cached blocks, it cannot free live tensors.",
          "PyTorch is loaded; its CUDA allocator ran out of device memory.");
      if (torch_segments_advised())
        add("torch.expandable_segments",
            "Start the kernel with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to reduce "
            "fragmentation of the caching allocator.",
            "PYTORCH_CUDA_ALLOC_CONF is not set; when 'reserved but unallocated' memory is large, "
            "fragmentation is what fails the allocation.");
    }
    if (jax_preallocation_advised())
      add("jax.preallocate",
          "Start the kernel with XLA_PYTHON_CLIENT_PREALLOCATE=false (or "
          "XLA_PYTHON_CLIENT_MEM_FRACTION=.5) so JAX does not reserve most of the GPU up front; "
          "it must be set before jax is imported.",
          "JAX/jaxlib is loaded and XLA_PYTHON_CLIENT_PREALLOCATE is not false: JAX reserves 75% "
          "of device memory at first use.");
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
    if (given("torch.smaller_batch") || given("mps.batch") || given("mlx.memory_limit")) return;
    add("gpu.smaller_model",
        "Reduce what lives on the device at once: smaller batches or inputs, mixed precision, "
        "and delete models/tensors from earlier cells before building new ones.",
        "The device had no room for the next allocation.");
  }

  void gpu_fault() {
    if (!env_is("CUDA_LAUNCH_BLOCKING", {"1"}))
      add("cuda.launch_blocking",
          "Restart the kernel with CUDA_LAUNCH_BLOCKING=1 in its environment and run the cell "
          "again: the error will then name the operation that faulted.",
          "CUDA reports kernel failures asynchronously, so the Python line in the traceback can "
          "be a later, innocent call.");
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

  void shared_memory_advice() {
    add(larger_dev_shm(v_.integer("/shared_memory/size_bytes")));
    if (pytorch()) add(torch_shares_less());
  }

  void cpu_advice() {
    add("cpu.rosetta_native_arm64",
        "On a Mac with Apple Silicon, check `python -c \"import platform; "
        "print(platform.machine())\"`: x86_64 means Python runs under Rosetta 2, which has no "
        "AVX. Install a native arm64 Python (python.org, Homebrew in /opt/homebrew, Miniforge) "
        "and the framework's arm64 build into a new environment.",
        "Rosetta 2 translates x86_64 code without AVX/AVX2; framework wheels for x86_64 are "
        "built to need them.");
    add("cpu.build_for_this_cpu",
        "On an older x86 CPU (no AVX/AVX2, or no AVX-512 where the build wants it): install a "
        "build made for it (conda-forge's builds, an older release, or one compiled from source "
        "with -march=native), or run the notebook on a machine whose CPU has what the build "
        "needs (lscpu lists the CPU's flags).",
        "Framework wheels from PyPI are compiled for a minimum instruction set (TensorFlow's "
        "need AVX); the CPU stops at the first instruction it does not have.");
  }

  void native_crash_advice() {
    const auto& tb = in_.traceback;
    if (tb.is_object() && tb.contains("frames") && !tb["frames"].empty()) {
      const ReportView top(tb["frames"][0]);  // a stored report's frame may be of any shape
      add("native.check_call",
          "Look at the call " + top.text("/function").value_or("?") + "() (" +
              top.text("/file").value_or("?") + ":" +
              std::to_string(top.integer("/line").value_or(0)) +
              "): check the arguments passed to native code there (array shapes, dtypes, "
              "pointers, file handles) and the version of the library it calls into.",
          "It is the innermost Python frame of the crashing thread, from faulthandler.");
    } else {
      add("native.traceback",
          "Keep faulthandler on (the watchdog's default; do not pass --no-faulthandler) so the "
          "next report names the Python line; or reproduce outside Jupyter with "
          "`python -X faulthandler script.py`.",
          "This report has no Python stack for the crash.");
    }
    // What every Python process loads (the C++ runtime, libpython) says nothing of mixed
    // builds: the advice is for when compiled packages were loaded.
    std::string names;
    for (const auto& n : in_.frameworks)
      if (n != "libstdc++" && n != "libpython" && names.find(n) == std::string::npos)
        names += (names.empty() ? "" : ", ") + n;
    if (!names.empty()) {
      add("native.matching_builds",
          "Make sure the compiled packages come from one source and were built for each other "
          "(do not mix conda and pip builds of numpy/torch/tensorflow; reinstall after upgrading "
          "numpy).",
          "Native libraries loaded in the kernel: " + names + ".");
    }
    if (in_.death.signal_name == "SIGBUS")
      add("native.sigbus_mmap",
          "If the data comes from a memory-mapped file (np.memmap, HDF5, Arrow), check that the "
          "file was not truncated or on a full/removed file system.",
          "SIGBUS is typical for reads beyond the end of a mapped file.");
  }

  void aborted() {
    add("abort.read_message",
        "Read the library's message just before the abort (quoted in the evidence): it states the "
        "failed check or the uncaught exception, which names what to fix.",
        "SIGABRT is raised on purpose by the library that found the problem.");
  }

  void killed_advice() {
    if (in_.death.signal_name == "SIGKILL") {
      add("killed.find_sender",
          "Find who sent SIGKILL: check `journalctl -k` and `journalctl -u systemd-oomd`, "
          "earlyoom logs, or your job scheduler's log (Slurm, Kubernetes) for a memory or time "
          "limit.",
          "SIGKILL cannot be caught, so only the sender's logs say why.");
      if (in_.pressure && in_.pressure->fraction() >= 0.9) {
        working_set("Memory was at " +
                    std::to_string(
                        std::llround(std::clamp(in_.pressure->fraction() * 100.0, -1e15, 1e15))) +
                    "% of the " + in_.pressure->limit_name + " when the kernel was killed");
        framework_host_memory();
      }
    } else {
      add("killed.sender",
          "Something sent " + in_.death.signal_name +
              " to the kernel process directly (a `kill`, a process manager, a time limit); "
              "check what else manages processes on this machine.",
          "The kernel manager was not asked to shut the kernel down.");
    }
  }

  void exited_advice() {
    if (f_.cause == CauseId::exited) {
      add("exit.exit_call",
          "Look for exit(), quit(), sys.exit() or os._exit() in the cells that ran, or a library "
          "that exits on its own.",
          "The interpreter ended normally, without a crash.");
      return;
    }
    const auto code = in_.death.exit_code.value_or(0);
    if (code > 128 && code <= 128 + 64)
      add("exit.wrapped_signal",
          "The kernel command looks like a wrapper script: its child died of signal " +
              std::to_string(code - 128) +
              "; run the kernel's interpreter directly in the kernelspec so the report sees the "
              "signal.",
          "Exit codes above 128 are how shells report a signal.");
    add("exit.error_before_exit",
        "Fix the error printed before the exit (see the evidence); if the kernel never started, "
        "run its command line from kernel.json in a terminal to see the message.",
        "A Python kernel exits with a non-zero code when an exception reaches the top level or "
        "sys.exit(n) is called.");
  }

  void hang_advice() {
    const auto pid = v_.integer("/kernel/pid");
    const std::string p = pid ? std::to_string(*pid) : "<pid>";
    const auto state = v_.text("/hang/process_state").value_or("");
    if (state.rfind('T', 0) == 0 || state.rfind('t', 0) == 0)
      add("hang.stopped",
          "The kernel process is stopped (SIGSTOP, job control or a debugger holding it): send it "
          "SIGCONT (`kill -CONT " +
              p + "`) or detach the debugger.",
          "Its state is " + state + ": it runs no code at all until continued.");
    if (state.rfind('D', 0) == 0)
      add("hang.blocked_io",
          "The kernel is blocked inside the operating system (state D): check the storage or "
          "network file system it reads from; an interrupt cannot help until the I/O returns.",
          "Uninterruptible sleep means a system call is waiting on a device or a mount.");
    add("hang.dump_stacks",
        "See where it is stuck with `py-spy dump --native --pid " + p + "` (or `gdb -p " + p +
            " -batch -ex 'thread apply all bt'`), then interrupt the "
            "kernel.",
        "ipykernel answers heartbeats from a thread of its own, so missed beats mean the whole "
        "process is stopped or wedged below Python.");
  }

  void signatures() {
    for (const auto& h : in_.hits) {
      if (h.signature->remedy.empty()) continue;
      const bool cited = std::any_of(f_.evidence.begin(), f_.evidence.end(), [&](const auto& e) {
        return e.pointer == h.pointer && e.line == h.line;
      });
      if (!cited && h.signature->supports != cause(f_.cause).id &&
          h.signature->supports != "context")
        continue;
      const std::string matched = h.label + " line " + std::to_string(h.line) + " matched " +
                                  h.signature->id + " (seen in public at " + h.signature->source +
                                  ").";
      // Its fix is the setting the kernel already ran with: nothing to advise.
      if (setting_already_applied(h.signature->id)) continue;
      // A request larger than the device makes every out-of-memory line's own advice moot.
      Remedy* own = h.signature->supports == cause(CauseId::gpu_out_of_memory).id
                        ? given("gpu.request_exceeds_device")
                        : nullptr;
      if (const auto restated = kRestatedBy.find(h.signature->id);
          own == nullptr && restated != kRestatedBy.end()) {
        own = given(restated->second);
        // "Shrink what lives on the device" is said by the framework's own remedy when there
        // is one (gpu.smaller_model then stays out).
        if (own == nullptr && restated->second == "gpu.smaller_model")
          for (const char* shrink : {"torch.smaller_batch", "mps.batch", "mlx.memory_limit"})
            if (own == nullptr) own = given(shrink);
      }
      if (own != nullptr) {
        if (ids_.insert("signature." + h.signature->id).second) {
          std::string sentence = matched;
          sentence[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(sentence[0])));
          own->why += " " + sentence;
        }
        continue;
      }
      add("signature." + h.signature->id, h.signature->remedy, matched);
    }
  }

  void incompatibilities() {
    for (const auto& item : v_.array("/fingerprint/incompatibilities")) {
      if (!item.is_object()) continue;
      const ReportView inc(item);
      const std::string what = inc.text("/what").value_or("?");
      add("compatibility." + inc.text("/id").value_or(what),
          "Resolve the version conflict: " + what + ".",
          inc.text("/why").value_or("") + " (" + inc.text("/source").value_or("") + ")");
    }
  }

  void unknown_advice() {
    add("unknown.more_facts",
        "Run the kernel under the watchdog with its default settings (faulthandler on, memory "
        "probes enabled); the next report will say more. `kernel-watchdog reports show` lists "
        "what this one lacked.",
        "The facts in this report do not point at one cause.");
  }
};

}  // namespace

std::vector<Remedy> choose_remedies(const Finding& finding, const DiagnosisInput& input) {
  return Advisor(finding, input).run();
}

}  // namespace kwd::diagnosis
