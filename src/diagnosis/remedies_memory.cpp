#include "kwd/diagnosis/advisor.hpp"
#include "kwd/diagnosis/worker_oom.hpp"

namespace kwd::diagnosis {
void Advisor::working_set(const std::string& why_prefix) {
  std::string why = why_prefix;
  if (auto peak = v_.integer("/memory/peak/rss"))
    why += (why.empty() ? "" : "; ") + std::string("the kernel's processes peaked at ") +
           bytes(static_cast<double>(*peak)) + " RSS";
  why += growth_note();
  add("oom.smaller_working_set",
      in_.r_kernel()
          ? "Hold less in memory at once: read and process the data in chunks "
            "(readr::read_csv_chunked, data.table::fread with select/nrows, arrow datasets), "
            "use integer and factor columns where they fit, and rm() large objects you no "
            "longer need (then gc())."
          : "Hold less in memory at once: read and process the data in chunks (pandas "
            "chunksize, generators, tf.data or a DataLoader), use smaller dtypes (float32, "
            "category), and del large intermediates you no longer need.",
      why.empty() ? "The kernel needed more memory than it could get." : why);
}

void Advisor::framework_host_memory() {
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

bool Advisor::keras_in_use() const {
  if (in_.loaded("keras")) return true;
  const auto mentions = [](const std::optional<std::string>& code) {
    return code && code->find("keras") != std::string::npos;
  };
  if (mentions(v_.text("/execution/cell_in_flight/code"))) return true;
  for (const auto& c : v_.array("/execution/last_cells"))
    if (mentions(ReportView(c).text("/code"))) return true;
  return false;
}

void Advisor::cgroup_neighbours() {
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
      "Stop or restart the other processes in the kernel's cgroup, or move them out of it: " + who +
          ". The limit counts their memory as well as the kernel's.",
      std::to_string(n) +
          " process(es) that are not the kernel's shared its memory cgroup when the OOM killer "
          "fired.");
}

void Advisor::oom() {
  if (const auto first = killed_before_kernel(v_);
      !first.empty() && pytorch() && cell_uses_dataloader(v_))
    add(dataloader_workers_hold_less(
        "The OOM killer took the kernel's DataLoader worker (pid " +
        std::to_string(first.front().pid) +
        ") first, as the largest process of the cgroup then, and the kernel next: the "
        "workers and the kernel share one limit."));
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

std::string Advisor::option_size(std::int64_t b) {
  constexpr std::int64_t MiB = 1024 * 1024, GiB = 1024 * MiB;
  if (b >= GiB && b % GiB == 0) return std::to_string(b / GiB) + "G";
  return std::to_string((b + MiB - 1) / MiB) + "M";
}

void Advisor::watchdog_limit() {
  const auto l = v_.integer("/cgroup/limit").value_or(0);
  const std::string now = l > 0 ? option_size(l) : "N";
  const std::string more = l > 0 ? option_size(2 * l) : "MORE";
  // The option itself is what to paste (into the kernelspec's argv, the wrap command or
  // $KERNEL_WATCHDOG_RUN_OPTIONS): the report does not say which of them set it.
  const auto copy_option = [&] {
    if (l > 0)
      act("oom.raise_watchdog_limit",
          {"copy", "Copy --memory-limit=" + more, "--memory-limit=" + more});
  };
  const std::string why = "The limit was kernel-watchdog's own (--memory-limit=" + now +
                          "), in a cgroup that held this kernel alone; the kernel needed more.";
  if (v_.text("/watchdog/mode").value_or("") == "smoke") {
    add("oom.raise_watchdog_limit",
        "Raise the per-notebook limit: `kernel-watchdog smoke --memory-limit=" + more +
            " ...` (it is " + now + " now), or leave the option out to run without one.",
        why);
    copy_option();
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
  copy_option();
}

}  // namespace kwd::diagnosis
