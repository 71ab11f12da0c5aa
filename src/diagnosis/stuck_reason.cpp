#include "kwd/diagnosis/stuck_reason.hpp"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "kwd/diagnosis/report_view.hpp"

namespace kwd::diagnosis {
namespace {

using nlohmann::json;

struct Thread {
  std::size_t index = 0;
  const json* value = nullptr;
  [[nodiscard]] ReportView view() const { return ReportView(*value); }
  [[nodiscard]] bool running() const { return view().text("/state").value_or("").starts_with('R'); }
  [[nodiscard]] const json& native() const { return view().array("/native"); }
  [[nodiscard]] const json& python() const { return view().array("/python"); }
  [[nodiscard]] std::string pointer() const { return "/threads/" + std::to_string(index); }
};

std::string text_of(const json& frame, const char* key) {
  return ReportView(frame).text(std::string("/") + key).value_or("");
}

bool any_native(const Thread& t, const auto& matches) {
  for (const auto& f : t.native())
    if (matches(text_of(f, "function"), text_of(f, "module"))) return true;
  return false;
}

// The first native function that matches, or "".
std::string native_named(const Thread& t, const auto& matches) {
  for (const auto& f : t.native())
    if (const auto fn = text_of(f, "function"); matches(fn, text_of(f, "module"))) return fn;
  return {};
}

// The kernel's own machinery: IPython's history writer and ipykernel's threads take locks as
// part of their work (a cell's start sets the history thread writing), and on a loaded machine
// a capture finds one in such a wait. It is never the lock a cell is stuck on.
bool kernel_machinery(std::string_view file) {
  for (const std::string_view package : {"/IPython/", "/ipykernel/", "/jupyter_client/"})
    if (file.find(package) != std::string_view::npos) return true;
  return false;
}

bool any_python(const Thread& t, std::string_view function, std::string_view file_part) {
  for (const auto& f : t.python())
    if (text_of(f, "function") == function &&
        text_of(f, "file").find(file_part) != std::string::npos)
      return true;
  return false;
}

// "worker() at /tmp/x.py:9" for the thread's innermost Python frame, else "".
std::string python_where(const Thread& t) {
  const auto& frames = t.python();
  if (frames.empty()) return {};
  const ReportView f(frames[0]);
  std::string file = f.text("/file").value_or("?");
  if (const auto slash = file.rfind('/'); slash != std::string::npos) file = file.substr(slash + 1);
  return f.text("/function").value_or("?") + "() at " + file + ":" +
         std::to_string(f.integer("/line").value_or(0));
}

bool base_starts(std::string_view module, std::string_view prefix) {
  if (const auto slash = module.rfind('/'); slash != std::string_view::npos)
    module.remove_prefix(slash + 1);
  return module.starts_with(prefix);
}

// The worker a stuck DataLoader waits on, from the captured children: one stopped, in
// uninterruptible sleep, or else the first whose main thread is not waiting for work in the
// worker loop. "worker pid 412 is stopped (T (stopped))", "worker pid 412 is in f() at x.py:9".
std::optional<std::string> stuck_worker(const ReportView& stacks) {
  const auto& children = stacks.array("/children");
  const std::string kernel_command = stacks.text("/command").value_or("");
  std::optional<std::string> busy;
  for (const auto& child : children) {
    const ReportView c(child);
    // A worker is forked from the kernel (its command line is the kernel's), or runs torch's
    // worker loop (spawned); another child (a subprocess, a Dask worker) is not one.
    const auto& threads = c.array("/threads");
    const bool forked = !kernel_command.empty() && c.text("/command") == kernel_command;
    const bool worker_loop = std::any_of(threads.begin(), threads.end(), [](const json& t) {
      return t.is_object() &&
             any_python(Thread{0, &t}, "_worker_loop", "torch/utils/data/_utils/worker.py");
    });
    if (!forked && !worker_loop) continue;
    const std::string pid = c.scalar("/pid").value_or("?");
    const std::string state = c.text("/process_state").value_or("");
    if (state.starts_with('T') || state.starts_with('t'))
      return "worker pid " + pid + " is stopped (" + state + ")";
    if (state.starts_with('D'))
      return "worker pid " + pid + " is in uninterruptible sleep (" + state + ")";
    if (busy) continue;
    for (std::size_t i = 0; i < threads.size(); ++i) {
      const Thread t{i, &threads[i]};
      if (!t.view().flag("/main") || t.python().empty()) continue;
      // An idle worker waits in _worker_loop for the next index (a multiprocessing queue's
      // get); any other place is its work.
      if (any_python(t, "_worker_loop", "torch/utils/data/_utils/worker.py") &&
          any_python(t, "get", "multiprocessing/queues.py"))
        continue;
      busy = "worker pid " + pid + " is in " + python_where(t);
    }
  }
  return busy;
}

}  // namespace

std::optional<StuckReason> stuck_reason(const json& stacks) {
  const ReportView s(stacks);
  std::vector<Thread> threads;
  std::optional<Thread> main;
  const auto& all = s.array("/threads");
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (!all[i].is_object()) continue;
    Thread t{i, &all[i]};
    threads.push_back(t);
    if (t.view().flag("/main")) main = t;
  }
  if (!main) return std::nullopt;

  // ipykernel's input()/getpass(): the cell waits on the stdin channel for a reply that a
  // front end without stdin (nbclient, papermill, a closed browser tab) never sends.
  if (any_python(*main, "_input_request", "ipykernel") ||
      any_python(*main, "raw_input", "ipykernel") || any_python(*main, "getpass", "ipykernel"))
    return StuckReason{"input",
                       "waiting for input(): the cell asked for a line on stdin and no front end "
                       "answered it",
                       main->pointer()};

  // Python threads blocked taking a lock in their own code (not threading's Event or Condition,
  // nor queue.Queue: those wait for work, as idle helper threads do; nor the kernel's own
  // machinery), the main thread among them, and none running: each waits for a lock another
  // holds, or one taken twice.
  std::vector<const Thread*> on_locks;
  bool any_running = false;
  bool main_on_lock = false;
  for (const auto& t : threads) {
    any_running = any_running || t.running();
    const bool acquiring = any_native(t, [](const std::string& fn, const std::string&) {
      return fn.find("PyThread_acquire_lock") != std::string::npos ||
             fn.starts_with("acquire_timed") || fn.starts_with("lock_PyThread");
    });
    const auto& py = t.python();
    const std::string file = py.empty() ? std::string() : text_of(py[0], "file");
    if (!acquiring || py.empty() || file.ends_with("/threading.py") ||
        file.ends_with("/queue.py") || kernel_machinery(file))
      continue;
    on_locks.push_back(&t);
    main_on_lock = main_on_lock || t.index == main->index;
  }
  if (main_on_lock && !any_running) {
    std::string who;
    for (std::size_t i = 0; i < on_locks.size() && i < 3; ++i)
      who += (i == 0 ? "" : "; ") + std::string("thread ") +
             ReportView(*on_locks[i]->value).scalar("/tid").value_or("?") + " in " +
             python_where(*on_locks[i]);
    if (on_locks.size() == 1)
      return StuckReason{"lock_wait",
                         "waiting for a lock that is never released: " + who +
                             ", the lock taken twice, or held by a thread that waits itself",
                         main->pointer()};
    return StuckReason{"lock_deadlock",
                       "in a deadlock: " + std::to_string(on_locks.size()) +
                           " threads each wait for a lock and none runs (" + who + ")",
                       main->pointer()};
  }

  // PyTorch's DataLoader waits on its workers' queue; a worker that died or hangs never fills it.
  for (const auto& t : threads)
    for (const char* fn : {"_try_get_data", "_get_data", "_next_data"})
      if (any_python(t, fn, "torch/utils/data/dataloader.py")) {
        if (auto worker = stuck_worker(s))
          return StuckReason{"dataloader",
                             "waiting for the DataLoader's worker processes: " + *worker,
                             t.pointer()};
        return StuckReason{"dataloader",
                           "waiting for the DataLoader's worker processes: one stopped, "
                           "deadlocked or died (`kernel-watchdog stacks` on a worker's pid shows "
                           "where it is)",
                           t.pointer()};
      }

  // A collective that never completes: some rank never joined, or a rank died.
  for (const auto& t : threads) {
    const auto fn = native_named(t, [](const std::string& f, const std::string& m) {
      return base_starts(m, "libnccl") || f.starts_with("nccl") || f.starts_with("gloo::") ||
             f.starts_with("MPI_") || f.starts_with("PMPI_");
    });
    if (!fn.empty())
      return StuckReason{"collective",
                         "waiting in a collective: " + fn +
                             " never returns; another rank has not joined it, or died",
                         t.pointer()};
  }

  // The GPU: the host waits for work queued on the device to finish.
  static constexpr std::array kGpuWaits{"cudaStreamSynchronize", "cudaDeviceSynchronize",
                                        "cudaEventSynchronize",  "cuStreamSynchronize",
                                        "cuCtxSynchronize",      "cuEventSynchronize",
                                        "hipStreamSynchronize",  "hipDeviceSynchronize"};
  for (const auto& t : threads) {
    const auto fn = native_named(t, [](const std::string& f, const std::string&) {
      for (const char* wait : kGpuWaits)
        if (f.starts_with(wait)) return true;
      return false;
    });
    if (!fn.empty())
      return StuckReason{
          "gpu_sync",
          "waiting for the GPU: " + fn + ", the work queued on the device has not finished",
          t.pointer()};
  }

  // OpenMP or BLAS threads that run without end while the main thread waits for them.
  for (const auto& t : threads) {
    if (!t.running()) continue;
    const bool spinning = any_native(t, [](const std::string&, const std::string& m) {
      return base_starts(m, "libgomp") || base_starts(m, "libiomp") || base_starts(m, "libomp") ||
             base_starts(m, "libopenblas") || base_starts(m, "libmkl");
    });
    if (spinning && t.index != main->index)
      return StuckReason{"openmp_spin",
                         "with OpenMP/BLAS threads spinning: thread " +
                             t.view().scalar("/tid").value_or("?") +
                             " runs in the thread pool's library",
                         t.pointer()};
  }

  // The cell's own code, running: a loop that does not end.
  if (main->running()) {
    for (const auto& f : main->python())
      if (ReportView(f).flag("/in_cell"))
        return StuckReason{"busy_loop",
                           "busy running the cell's own Python code: " + python_where(*main) +
                               ", a loop that does not end, or work that takes longer",
                           main->pointer()};
  }
  return std::nullopt;
}

}  // namespace kwd::diagnosis
