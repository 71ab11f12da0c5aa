#include "kwd/diagnosis/rule_context.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <set>

#include "kwd/diagnosis/native_modules.hpp"
#include "kwd/util/size_parse.hpp"

namespace kwd::diagnosis {

using nlohmann::json;

std::string RuleContext::signal_meaning(const std::string& name) {
  if (name == "SIGSEGV") return "segmentation fault: native code touched memory it does not own";
  if (name == "SIGBUS") return "bus error: a bad memory access, often a truncated mapped file";
  if (name == "SIGILL") return "illegal instruction: code for a CPU feature this machine lacks";
  if (name == "SIGFPE") return "arithmetic fault, e.g. an integer division by zero";
  if (name == "SIGSYS") return "a system call the process was not allowed to make";
  if (name == "SIGTRAP") return "a trap/breakpoint instruction in native code";
  if (name == "SIGABRT") return "the process aborted itself";
  if (name == "SIGKILL") return "it cannot be caught, so the kernel could not say why";
  return "";
}

std::string RuleContext::percent(double fraction) {
  return std::to_string(std::llround(std::clamp(fraction * 100.0, -1e15, 1e15))) + "%";
}

// The cause's own headline, which the rules extend with what the facts show.
std::string RuleContext::title(const Finding& f) {
  return std::string(cause(f.cause).title);
}

std::string RuleContext::shorten(const std::string& s, std::size_t n) {
  return s.size() <= n ? s : s.substr(0, n) + "…";
}

bool RuleContext::sigkill() const {
  return in_.death.signaled && in_.death.signal_name == "SIGKILL";
}

std::optional<std::size_t> RuleContext::running_cell_frame() const {
  if (!in_.traceback.is_object()) return std::nullopt;
  const auto& frames = in_.traceback.value("frames", json::array());
  for (std::size_t i = 0; i < frames.size(); ++i)
    if (frames[i].value("cell", "") == "in flight") return i;
  return std::nullopt;
}

std::string RuleContext::cell_phrase() const {
  if (auto n = v_.integer("/execution/cell_in_flight/execution_count"))
    return " while cell [" + std::to_string(*n) + "] was running";
  if (v_.has("/execution/cell_in_flight") || running_cell_frame())
    return " while a cell was running";
  if (v_.text("/execution/state_at_death").value_or("") == "idle")
    return idle_unproven() ? " with no cell seen running" : " while the kernel was idle";
  return "";
}

std::optional<std::string> RuleContext::shim_never_ran() const {
  if (!v_.has("/watchdog/python_shim/ran") || v_.flag("/watchdog/python_shim/ran"))
    return std::nullopt;
  if (in_.r_kernel())
    return "python_traceback: an R kernel, where kernel-watchdog's start-up hook (faulthandler, "
           "cell announcements) does not run: it is for Python kernels. So there is no stack of "
           "the crash in R's terms (R's own crash message, if it printed one, is in the stderr "
           "tail), and cells are known from IOPub alone";
  return "python_traceback: kernel-watchdog's start-up hook for Python kernels (faulthandler "
         "on its own pipe, cell announcements) never ran in this kernel: " +
         v_.text("/watchdog/python_shim/why_not").value_or("the reason is unknown") +
         "; so no Python stack of the crash, and cells are known from IOPub alone";
}

bool RuleContext::idle_unproven() const {
  if (v_.text("/execution/state_at_death").value_or("") != "idle") return false;
  if (!v_.has("/watchdog")) return false;  // who wrote it is unknown: IOPub's word stands
  // Reports from before the cell pipe announced cells through the faulthandler shim.
  const bool announced = v_.has("/watchdog/cell_announcements")
                             ? v_.flag("/watchdog/cell_announcements")
                             : v_.flag("/watchdog/faulthandler");
  if (announced) return false;
  const auto& d = in_.death;
  if (!d.signaled) return d.exit_code.has_value();
  static constexpr std::string_view kOwnHand[] = {"SIGSEGV", "SIGBUS",  "SIGILL", "SIGFPE",
                                                  "SIGABRT", "SIGTRAP", "SIGSYS"};
  return std::find(std::begin(kOwnHand), std::end(kOwnHand), d.signal_name) != std::end(kOwnHand);
}

std::string RuleContext::how_it_died() const {
  const auto& d = in_.death;
  if (d.signaled) return "died of " + d.signal_name;
  if (d.exit_code) return "exited with code " + std::to_string(*d.exit_code);
  return "ended";
}

void RuleContext::termination(Finding& f) const {
  const auto& d = in_.death;
  if (d.signaled) {
    std::string fact = "killed by " + d.signal_name;
    if (const auto meaning = signal_meaning(d.signal_name); !meaning.empty())
      fact += " (" + meaning + ")";
    if (d.core_dumped) fact += ", core dumped";
    f.evidence.push_back({fact, "/termination/signal_name"});
  } else if (d.exit_code) {
    f.evidence.push_back(
        {"exited with code " + std::to_string(*d.exit_code), "/termination/exit_code"});
  }
}

void RuleContext::hit(Finding& f, const SignatureHit& h) const {
  f.evidence.push_back({h.label + " line " + std::to_string(h.line) + ": " + h.excerpt + "  [" +
                            h.signature->id + ": " + h.signature->meaning + "]",
                        h.pointer, h.line});
}

void RuleContext::more_hits(Finding& f, CauseId cause, const SignatureHit* except) const {
  const std::string_view id = diagnosis::cause(cause).id;
  for (const auto& h : in_.hits)
    if (&h != except && (h.signature->supports == id || h.signature->supports == "context"))
      hit(f, h);
}

void RuleContext::pressure(Finding& f, double at_least) const {
  if (!in_.pressure || in_.pressure->fraction() < at_least) return;
  const auto& p = *in_.pressure;
  f.evidence.push_back({"memory reached " + util::format_bytes(static_cast<double>(p.used_bytes)) +
                            " of the " + util::format_bytes(static_cast<double>(p.limit_bytes)) +
                            " " + p.limit_name + " (" + percent(p.fraction()) + ")",
                        p.used_pointer});
}

void RuleContext::cell(Finding& f) const {
  if (auto n = v_.integer("/execution/cell_in_flight/execution_count")) {
    std::string fact = "cell [" + std::to_string(*n) + "] was running";
    if (auto s = v_.number("/execution/cell_in_flight/running_for_s")) {
      char buf[32];
      std::snprintf(buf, sizeof buf, *s < 10 ? "%.1f" : "%.0f", *s);
      fact += std::string(" for ") + buf + " s";
    }
    f.evidence.push_back({fact, "/execution/cell_in_flight"});
  } else if (const auto frame = running_cell_frame();
             frame && !v_.has("/execution/cell_in_flight")) {
    f.evidence.push_back(
        {"a cell was running (its code is on the crashing thread's stack) but the kernel never "
         "announced it to the notebook: it died within milliseconds of starting it",
         "/python_traceback/frames/" + std::to_string(*frame)});
  } else if (idle_unproven()) {
    f.missing.push_back(
        "execution: the kernel's last IOPub status was idle, but it did not announce its cells "
        "to the watchdog (a kernel the daemon found, or one run with --no-faulthandler), and a "
        "cell that kills the kernel at once dies before IOPub tells of it: the cell run last "
        "may be the one");
  }
}

std::optional<std::pair<std::string, std::string>> RuleContext::crash_site() const {
  if (!in_.traceback.is_object() || !in_.traceback.contains("frames")) return std::nullopt;
  const auto& frames = in_.traceback["frames"];
  if (!frames.is_array() || frames.empty()) return std::nullopt;
  // The innermost frame in the notebook's own code says more than a library frame.
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const auto& fr = frames[i];
    if (!fr.value("in_cell", false)) continue;
    std::string where = fr.value("function", "?") + "()";
    if (where == "<module>()") where = "top-level code";
    where += ", line " + std::to_string(fr.value("line", 0));
    const auto n = v_.integer("/execution/cell_in_flight/execution_count");
    if (fr.value("cell", "") == "in flight")
      where += n ? " of cell [" + std::to_string(*n) + "]" : " of the running cell";
    else
      where += " of an earlier cell";
    return std::make_pair(where, "/python_traceback/frames/" + std::to_string(i));
  }
  const auto& top = frames[0];
  std::string file = top.value("file", "?");
  if (auto slash = file.rfind('/'); slash != std::string::npos) file = file.substr(slash + 1);
  return std::make_pair(
      top.value("function", "?") + "() in " + file + ":" + std::to_string(top.value("line", 0)),
      std::string("/python_traceback/frames/0"));
}

void RuleContext::traceback(Finding& f) const {
  if (!in_.traceback.is_object()) return;
  const auto& frames = in_.traceback.value("frames", json::array());
  if (frames.empty()) return;
  const auto& top = frames[0];
  std::string fact = "Python stack at the crash (faulthandler): " + top.value("function", "?") +
                     "() at " + top.value("file", "?") + ":" + std::to_string(top.value("line", 0));
  if (auto site = crash_site(); site && site->second != "/python_traceback/frames/0")
    fact += ", called from " + site->first;
  f.evidence.push_back({fact, "/python_traceback/frames/0"});
}

namespace {

// How far up a stripped library's own frames the culprit's name is looked for: NVIDIA's
// driver 580 faulted nine frames below the cuMemcpyHtoD_v2 it exports (an H200, 2026-11-30).
constexpr std::size_t kMaxUnnamedDepth = 16;
constexpr std::size_t kMaxCrashMessages = 3;

// A library's own way of dying on purpose (Abseil's and glog's CHECK, TensorFlow's
// LogMessageFatal): its frames sit between abort() and the code whose check failed, which is
// the culprit ("TensorShapeBase::dim_size", not "LogMessage::FailWithoutStackTrace").
bool reports_a_failure(const std::string& function) {
  return function.find("LogMessage") != std::string::npos &&
         (function.find("log_internal::") != std::string::npos ||
          function.starts_with("google::") || function.find("::internal::") != std::string::npos);
}

std::string base_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

bool RuleContext::crash_stack_at_fault() const {
  // Only a stack that starts at the faulting instruction is the crash's: one that does not (an
  // emulator's own, under qemu-user; the handler's frames not cut) would blame the wrong code.
  const auto& frames = v_.array("/crash_stack/frames");
  const auto pc = v_.text("/crash_stack/pc");
  return !frames.empty() && pc && ReportView(frames[0]).text("/pc") == pc;
}

std::optional<std::pair<std::string, std::string>> RuleContext::native_culprit() const {
  const auto& frames = v_.array("/crash_stack/frames");
  if (!crash_stack_at_fault()) return std::nullopt;
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const ReportView frame(frames[i]);
    const std::string module = base_name(frame.text("/module").value_or(""));
    if (module.empty() || is_runtime_module(module)) continue;
    const auto function = frame.text("/function");
    if (function && reports_a_failure(*function)) continue;
    std::string what =
        function && !function->empty() ? shorten(*function, 80) + " in " + module : module;
    if (!function || function->empty()) {
      // A stripped library (distributions' builds of NumPy, PyTorch) names only the functions
      // it exports: the nearest named one of the same library the fault came through says
      // which part of it faulted ("libtorch_cpu.so (under at::TensorIteratorBase::...)").
      for (std::size_t j = i + 1; j < frames.size() && j <= i + kMaxUnnamedDepth; ++j) {
        const ReportView caller(frames[j]);
        if (caller.text("/module") != frame.text("/module")) break;
        if (const auto named = caller.text("/function"); named && !named->empty()) {
          what += " (under " + shorten(*named, 80) + ")";
          break;
        }
      }
    }
    return std::make_pair(what, "/crash_stack/frames/" + std::to_string(i));
  }
  return std::nullopt;
}

void RuleContext::native_stack(Finding& f) const {
  if (!v_.object("/crash_stack")) return;
  if (const auto culprit = native_culprit()) {
    std::string fact = "native stack at the crash: " + culprit->first;
    const ReportView frame(*v_.find(culprit->second));
    if (const auto file = frame.text("/file"))
      fact +=
          " (" + base_name(*file) + ":" + std::to_string(frame.integer("/line").value_or(0)) + ")";
    fact += ", the first frame outside the C/C++ runtime and the interpreter";
    f.evidence.push_back({fact, culprit->second});
  } else if (const auto& frames = v_.array("/crash_stack/frames"); crash_stack_at_fault()) {
    const ReportView top(frames[0]);
    f.evidence.push_back(
        {"native stack at the crash: every frame is in the C/C++ runtime or the "
         "interpreter, the top one " +
             top.text("/function").value_or("?") + " in " +
             base_name(top.text("/module").value_or("?")),
         "/crash_stack/frames/0"});
  }
  // What the libraries said as the process died, as macOS's crash report kept it ("abort()
  // called", malloc's "pointer being freed was not allocated").
  const auto& messages = v_.array("/crash_stack/messages");
  for (std::size_t i = 0; i < messages.size() && i < kMaxCrashMessages; ++i)
    if (const auto text = ReportView(messages[i]).text(""))
      f.evidence.push_back({"the system's crash report says: " + shorten(*text, 200),
                            "/crash_stack/messages/" + std::to_string(i)});
  if (const auto missing = v_.text("/crash_stack/missing"))
    f.missing.push_back("crash_stack: " + *missing);
}

std::optional<Evidence> RuleContext::full_device() const {
  // Report data: any field may be null or of the wrong type (NOT_SUPPORTED answers, other
  // writers), so everything is read through the tolerant view. NVIDIA's devices are under
  // gpu (NVML), AMD's and Intel's under drm_gpu (DRM fdinfo and sysfs), with the same fields;
  // each section numbers its own devices.
  const auto kernel_pid = v_.integer("/kernel/pid");
  for (const std::string section : {"/gpu", "/drm_gpu"}) {
    std::set<std::int64_t> our_devices;
    for (const auto& p : v_.array(section + "/processes")) {
      const ReportView proc(p);
      if (kernel_pid && proc.integer("/pid") == kernel_pid)
        our_devices.insert(proc.integer("/device").value_or(0));
    }
    const auto& devices = v_.array(section + "/devices");
    for (std::size_t i = 0; i < devices.size(); ++i) {
      const ReportView d(devices[i]);
      const auto total = d.integer("/memory_total").value_or(0);
      const auto used = d.integer("/memory_used").value_or(0);
      const auto index = d.integer("/index").value_or(0);
      if (total <= 0 || !our_devices.contains(index)) continue;
      const double frac = static_cast<double>(used) / static_cast<double>(total);
      if (frac >= 0.97)
        return Evidence{"GPU " + std::to_string(index) + " (" + d.text("/name").value_or("?") +
                            ") had " + util::format_bytes(static_cast<double>(used)) + " of " +
                            util::format_bytes(static_cast<double>(total)) + " in use (" +
                            percent(frac) + "), some of it the kernel's",
                        section + "/devices/" + std::to_string(i)};
    }
  }
  return std::nullopt;
}

std::optional<std::int64_t> RuleContext::last_error_survived_until() const {
  const auto count = v_.integer("/execution/last_error/execution_count");
  if (!count) return std::nullopt;
  std::optional<std::int64_t> until;
  for (const auto& c : v_.array("/execution/last_cells")) {
    if (!c.is_object()) continue;
    const ReportView cell(c);
    const auto status = cell.text("/status").value_or("");
    const auto n = cell.integer("/execution_count");
    if (n && *n > *count && (status == "ok" || status == "error")) until = n;
  }
  return until;
}

}  // namespace kwd::diagnosis
