#include <signal.h>

#include <algorithm>
#include <charconv>

#include "kwd/hang/thread_snapshot.hpp"
#include "kwd/platform/linux/procfs.hpp"
#include "kwd/stacks/linux/libdw_api.hpp"
#include "kwd/stacks/linux/python_dump.hpp"
#include "kwd/stacks/linux/unwind_child.hpp"
#include "kwd/stacks/pure.hpp"
#include "kwd/stacks/stacks.hpp"
#include "kwd/util/clock.hpp"

namespace kwd::stacks {
namespace {

using Clock = std::chrono::steady_clock;
namespace proc = platform::linux_proc;

std::string command_line(pid_t pid) {
  auto text = proc::read_small_file("/proc/" + std::to_string(pid) + "/cmdline").value_or("");
  while (!text.empty() && text.back() == '\0')
    text.pop_back();
  std::replace(text.begin(), text.end(), '\0', ' ');
  text = redact_command(text);
  if (text.size() > 300) text = text.substr(0, 297) + "...";
  return text;
}

// Why native frames cannot be had before trying: another tracer already holds the process.
std::string tracer_problem(pid_t pid) {
  const auto status = proc::read_small_file("/proc/" + std::to_string(pid) + "/status");
  const auto tracer = status ? tracer_pid(*status) : std::nullopt;
  if (!tracer || *tracer == 0) return {};
  std::string name =
      proc::read_small_file("/proc/" + std::to_string(*tracer) + "/comm").value_or("?");
  while (!name.empty() && name.back() == '\n')
    name.pop_back();
  return "the process is already traced by pid " + std::to_string(*tracer) + " (" + name +
         "): one tracer at a time";
}

void add_native(ProcessStacks& out, const CaptureOptions& options) {
  const auto& lib = linux_stacks::Libdw::get();
  if (!lib.missing.empty()) {
    out.native_missing = lib.missing;
    return;
  }
  if (auto busy = tracer_problem(out.pid); !busy.empty()) {
    out.native_missing = std::move(busy);
    return;
  }
  std::vector<pid_t> tids;
  for (const auto& t : out.threads) {
    // A thread in uninterruptible sleep would not stop for us until it leaves it: its
    // kernel-side wait (wchan) is what there is to say.
    if (t.state.starts_with("D") || t.state.starts_with("Z")) continue;
    tids.push_back(t.tid);
  }
  const auto native =
      linux_stacks::capture_native(lib, out.pid, tids, options.max_frames, options.native_budget);
  out.frozen_us = native.frozen_us;
  if (!native.problem.empty() && native.threads.empty()) out.native_missing = native.problem;
  for (auto& t : out.threads) {
    if (t.state.starts_with("D")) t.native_problem = "in uninterruptible sleep: not stopped";
    for (const auto& [tid, tp] : native.thread_pointers)
      if (tid == t.tid) t.thread_pointer = tp;
    for (const auto& u : native.threads) {
      if (u.tid != t.tid) continue;
      t.native = u.frames;
      t.native_truncated = u.truncated;
      t.native_problem = u.problem;
    }
  }
  // All threads refused alike (EPERM): said once for the process.
  if (out.native_missing.empty() && !out.threads.empty() &&
      std::all_of(out.threads.begin(), out.threads.end(), [&](const ThreadStacks& t) {
        return t.native.empty() && t.native_problem == out.threads.front().native_problem &&
               !t.native_problem.empty();
      }))
    out.native_missing = out.threads.front().native_problem;
}

// The thread to run the Python dump's handler: the main thread unless it cannot take a signal
// now (uninterruptible sleep, stopped, a zombie), then any that can; 0 when none can.
pid_t dump_thread(pid_t pid, const std::vector<ThreadStacks>& threads) {
  const auto can_take = [](const ThreadStacks& t) {
    return t.state.starts_with("S") || t.state.starts_with("R");
  };
  for (const auto& t : threads)
    if (t.tid == pid && can_take(t)) return t.tid;
  for (const auto& t : threads)
    if (can_take(t)) return t.tid;
  return 0;
}

// The descendants of `pid`, breadth first, from each thread's /proc children list (a child
// belongs to the thread that forked it). At most `cap`; `total` counts all found.
std::vector<pid_t> descendants(pid_t pid, std::size_t cap, std::size_t& total) {
  constexpr std::size_t kMaxScanned = 256;  // a fork bomb is not walked to its end
  std::vector<pid_t> found;
  std::vector<pid_t> queue{pid};
  total = 0;
  for (std::size_t next = 0; next < queue.size() && queue.size() < kMaxScanned; ++next) {
    const std::string task_dir = "/proc/" + std::to_string(queue[next]) + "/task";
    for (const pid_t tid : proc::list_pids(task_dir)) {  // its numeric entries: the threads
      const auto text = proc::read_small_file(task_dir + "/" + std::to_string(tid) + "/children");
      if (!text) continue;
      std::size_t at = 0;
      while (at < text->size()) {
        const auto end = std::min(text->find(' ', at), text->size());
        pid_t child = 0;
        const auto [ptr, ec] = std::from_chars(text->data() + at, text->data() + end, child);
        if (ec == std::errc{} && ptr == text->data() + end && child > 0 &&
            std::find(queue.begin(), queue.end(), child) == queue.end()) {
          queue.push_back(child);
          ++total;
          if (found.size() < cap) found.push_back(child);
        }
        at = end + 1;
      }
    }
  }
  return found;
}

}  // namespace

ProcessStacks capture_stacks(pid_t pid, const CaptureOptions& options) {
  const auto started = Clock::now();
  ProcessStacks out;
  out.pid = pid;
  out.taken_at_ms = util::wall_ms();
  const auto snapshot = hang::snapshot_process(pid, options.max_threads);
  out.found = snapshot.available && hang::process_alive(pid);
  if (!out.found) return out;
  out.command = command_line(pid);
  out.process_state = snapshot.process_state;
  out.threads_total = snapshot.threads_total;
  for (const auto& s : snapshot.threads) {
    ThreadStacks t;
    t.tid = s.tid;
    t.name = s.name;
    t.state = s.state;
    t.wchan = s.wchan;
    t.syscall = blocked_syscall(proc::read_small_file("/proc/" + std::to_string(pid) + "/task/" +
                                                      std::to_string(s.tid) + "/syscall")
                                    .value_or(""));
    out.threads.push_back(std::move(t));
  }
  // Python first: its signal interrupts one thread's system call, which the native capture
  // would otherwise show as the signal handler's frames.
  std::string python_text;
  const std::string traced = options.python ? tracer_problem(pid) : std::string();
  if (options.python &&
      (out.process_state.starts_with("T") || out.process_state.starts_with("t"))) {
    // Its handler cannot run until it is continued; the signal would wait for that.
    out.python_missing = "the process is stopped (" + out.process_state +
                         "): it cannot run its dump until continued";
  } else if (options.python && !traced.empty()) {
    // A debugger stops the process at the signal (gdb does, for SIG44, by default).
    out.python_missing = traced + ": its dump is not asked for";
  } else if (options.python) {
    auto dump = linux_stacks::request_python_dump(pid, dump_thread(pid, out.threads),
                                                  options.python_budget);
    python_text = std::move(dump.text);
    out.python_missing = std::move(dump.missing);
  } else {
    out.python_missing = "not asked for";
  }
  if (options.native)
    add_native(out, options);
  else
    out.native_missing = "not asked for";
  if (!python_text.empty()) join_python(out, parse_python_threads(python_text));
  if (options.max_children > 0) {
    // The children share the budget of one capture: the caller (a hang report on the event
    // loop) waits no longer for a kernel with workers than for one without.
    const auto deadline = started + options.python_budget + options.native_budget;
    CaptureOptions each = options;
    each.max_children = 0;
    for (const pid_t child : descendants(pid, options.max_children, out.children_total)) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) break;
      each.python_budget = std::min(options.python_budget, left / 2);
      each.native_budget = std::min(options.native_budget, left - each.python_budget);
      auto stacks = capture_stacks(child, each);
      if (stacks.found) out.children.push_back(std::move(stacks));
    }
  }
  out.capture_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
  return out;
}

}  // namespace kwd::stacks
