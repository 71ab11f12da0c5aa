#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "kwd/diagnosis/findings.hpp"

namespace kwd::diagnosis {

// What every rule reads and how the rules say things: the facts of one report, and the
// phrases and evidence lines they share. The rules themselves live one file per family of
// causes (rules_memory.cpp, rules_gpu.cpp, rules_crash.cpp, rules_host.cpp) and are called in
// order by classify() in rules.cpp.
class RuleContext {
 public:
  explicit RuleContext(const DiagnosisInput& input) : in_(input), v_(input.view) {}

 protected:
  const DiagnosisInput& in_;
  const ReportView& v_;

  [[nodiscard]] bool sigkill() const;
  // The first frame of the cell that was running on the crashing thread, if any.
  [[nodiscard]] std::optional<std::size_t> running_cell_frame() const;
  // " while cell [12] was running" / " while the kernel was idle" / " with no cell seen
  // running" (idle on IOPub, not proven: see idle_unproven) / "".
  [[nodiscard]] std::string cell_phrase() const;
  // IOPub said idle, but the kernel did not announce its cells to the watchdog and died by its
  // own hand (a crash signal, an exit): a cell that does that at once dies before IOPub tells
  // of it, so "idle" may be the cell run last.
  [[nodiscard]] bool idle_unproven() const;
  [[nodiscard]] std::string how_it_died() const;
  // The `missing` line for a kernel that was given the shim but never ran it, saying why.
  [[nodiscard]] std::optional<std::string> shim_never_ran() const;
  void termination(Finding& f) const;
  void hit(Finding& f, const SignatureHit& h) const;
  // Hits that support `cause` (or only give context), other than `except`, as evidence.
  void more_hits(Finding& f, CauseId cause, const SignatureHit* except) const;
  void pressure(Finding& f, double at_least) const;
  void cell(Finding& f) const;
  // The frame where Python was when it died, said briefly.
  [[nodiscard]] std::optional<std::pair<std::string, std::string>> crash_site() const;
  void traceback(Finding& f) const;
  // The faulting thread's first native frame outside the C and C++ runtimes, the dynamic
  // loader, the interpreter and the crash handler (crash_stack: kernel-watchdog-crash.so):
  // "crashy::boom(int) in libcrashy.so", and the frame's pointer in the report.
  [[nodiscard]] std::optional<std::pair<std::string, std::string>> native_culprit() const;
  // Whether crash_stack's first frame is at the faulting pc (the stack is the crash's own).
  [[nodiscard]] bool crash_stack_at_fault() const;
  // That frame as evidence, and why there are no native frames when the report says so.
  void native_stack(Finding& f) const;
  // The last error shown on IOPub came from a cell the kernel went on from.
  [[nodiscard]] std::optional<std::int64_t> last_error_survived_until() const;
  // A device whose memory was (nearly) all in use while the kernel held some of it.
  [[nodiscard]] std::optional<Evidence> full_device() const;

  // "segmentation fault: native code touched memory it does not own" for "SIGSEGV".
  static std::string signal_meaning(const std::string& name);
  static std::string percent(double fraction);
  // The cause's own headline, which the rules extend with what the facts show.
  static std::string title(const Finding& f);
  static std::string shorten(const std::string& s, std::size_t n);
};

// The rules, by family; each says whether its causes apply. classify() asks them in order,
// most specific first.
std::optional<Finding> oom_kill_rule(const DiagnosisInput& input);
std::optional<Finding> sigkill_rule(const DiagnosisInput& input);
std::optional<Finding> gpu_fault_rule(const DiagnosisInput& input);
std::optional<Finding> gpu_oom_rule(const DiagnosisInput& input);
std::optional<Finding> shared_memory_rule(const DiagnosisInput& input);
std::optional<Finding> cpu_unsupported_rule(const DiagnosisInput& input);
std::optional<Finding> native_crash_rule(const DiagnosisInput& input);
std::optional<Finding> abort_rule(const DiagnosisInput& input);
std::optional<Finding> other_signal_rule(const DiagnosisInput& input);
std::optional<Finding> exit_status_rule(const DiagnosisInput& input);

}  // namespace kwd::diagnosis
