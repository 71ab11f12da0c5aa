#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "kwd/diagnosis/stuck_reason.hpp"
#include "kwd/stacks/pure.hpp"
#include "kwd/stacks/stacks_json.hpp"

namespace kwd::stacks {
namespace {

std::string base_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string native_text(const NativeFrame& f) {
  const std::string module = f.module.empty() ? "?" : base_name(f.module);
  std::string text;
  if (f.function.empty())
    text = fmt::format("0x{:x} ({}+0x{:x})", f.pc, module, f.offset);
  else
    text = fmt::format("{} ({})", f.function, module);
  if (!f.file.empty()) text += fmt::format(" at {}:{}", f.file, f.line);
  return text;
}

std::string python_text(const PythonFrame& f) {
  return fmt::format("{} ({}:{})", f.function, f.file, f.line);
}

std::string thread_heading(const ThreadStacks& t, pid_t pid) {
  std::string text = fmt::format("Thread {}", t.tid);
  if (!t.name.empty()) text += fmt::format(" \"{}\"", t.name);
  std::vector<std::string> marks;
  if (t.tid == pid) marks.emplace_back("main");
  if (t.python_ident) marks.push_back(fmt::format("Python 0x{:x}", *t.python_ident));
  for (std::size_t i = 0; i < marks.size(); ++i)
    text += (i == 0 ? " (" : ", ") + marks[i] + (i + 1 == marks.size() ? ")" : "");
  text += ": " + t.state;
  if (!t.syscall.empty()) text += ", in " + t.syscall;
  if (!t.wchan.empty()) text += " (kernel: " + t.wchan + ")";
  return text;
}

}  // namespace

bool is_eval_loop(const NativeFrame& frame) {
  return frame.function.starts_with("_PyEval_EvalFrame") ||
         frame.function.starts_with("PyEval_EvalFrame");
}

std::vector<ShownFrame> joined_view(const ThreadStacks& thread, std::size_t max_native) {
  std::vector<ShownFrame> shown;
  std::size_t native = 0;
  bool reached_python = false;
  for (const auto& f : thread.native) {
    if (!thread.python.empty() && is_eval_loop(f)) {
      reached_python = true;
      break;
    }
    if (native++ == max_native) {
      shown.push_back({false, "..."});
      break;
    }
    shown.push_back({false, native_text(f)});
  }
  // Without the native stack (no ptrace), or with an eval loop the unwinder never reached, the
  // Python frames still follow what was shown.
  if (reached_python || thread.native.size() <= max_native || !thread.python.empty())
    for (const auto& f : thread.python)
      shown.push_back({true, python_text(f)});
  return shown;
}

std::string main_thread_summary(const ProcessStacks& s) {
  // libc's wrapper of the system call says less than whoever called it.
  const auto system_library = [](const NativeFrame& f) {
    const auto name = base_name(f.module);
    return name.starts_with("libc.so") || name.starts_with("libc-") ||
           name.starts_with("libpthread") || name.starts_with("ld-linux");
  };
  for (const auto& t : s.threads) {
    if (t.tid != s.pid) continue;
    std::string text = t.syscall.empty() ? t.state : "in " + t.syscall;
    const auto caller = std::find_if_not(t.native.begin(), t.native.end(), system_library);
    if (caller != t.native.end() && !is_eval_loop(*caller))
      text += ", at " + native_text(*caller);
    else if (!t.native.empty())
      text += ", at " + native_text(t.native.front());
    if (!t.python.empty()) text += ", from " + python_text(t.python.front());
    return text;
  }
  return {};
}

std::string render_text(const ProcessStacks& s) {
  if (!s.found) return fmt::format("No process {}.\n", s.pid);
  std::string out = fmt::format("Process {}: {}\n", s.pid, s.command.empty() ? "?" : s.command);
  out += fmt::format("{} thread{}", s.threads_total, s.threads_total == 1 ? "" : "s");
  if (s.threads.size() < s.threads_total) out += fmt::format(" ({} shown)", s.threads.size());
  if (s.frozen_us >= 0) out += fmt::format("; stopped for {:.1f} ms", double(s.frozen_us) / 1000);
  out += fmt::format("; taken in {} ms\n", s.capture_ms);
  if (const auto why = diagnosis::stuck_reason(to_json(s)))
    out += "What it waits on: " + why->text + "\n";
  if (!s.native_missing.empty()) out += "Native frames not available: " + s.native_missing + "\n";
  if (!s.python_missing.empty()) out += "Python frames not available: " + s.python_missing + "\n";
  for (const auto& t : s.threads) {
    out += "\n" + thread_heading(t, s.pid) + "\n";
    for (const auto& f : joined_view(t))
      out += "    " + f.text + "\n";
    if (!t.native_problem.empty()) out += "    (native frames: " + t.native_problem + ")\n";
  }
  for (const auto& p : s.python_unjoined) {
    out += fmt::format("\nPython thread 0x{:x} (no native thread matched)\n", p.ident);
    for (const auto& f : p.frames)
      out += "    " + python_text(f) + "\n";
  }
  if (s.children_total > 0) {
    out += fmt::format("\n{} child process{}", s.children_total, s.children_total == 1 ? "" : "es");
    if (s.children.size() < s.children_total) out += fmt::format(" ({} shown)", s.children.size());
    out += "\n";
  }
  for (const auto& child : s.children) {
    // Indented under the process: each child's own heading, threads and frames.
    std::string text = render_text(child);
    if (text.starts_with("Process ")) text.replace(0, 7, "Child process");
    out += "\n";
    for (const auto line : lines_of(text))
      out += line.empty() ? std::string("\n") : "  " + std::string(line) + "\n";
  }
  return out;
}

}  // namespace kwd::stacks
