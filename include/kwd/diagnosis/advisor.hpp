#pragma once

#include <initializer_list>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kwd/diagnosis/findings.hpp"

namespace kwd::diagnosis {

// Chooses the remedies for one finding: what the cause calls for, fitted to the frameworks
// loaded, the environment and the signatures seen; most useful first, no duplicates. The
// advice for each family of causes is defined in a file of its own (remedies_memory.cpp,
// remedies_gpu.cpp, remedies_crash.cpp); what they share, and the order, in remedies.cpp.
class Advisor {
 public:
  Advisor(const Finding& finding, const DiagnosisInput& input)
      : f_(finding), in_(input), v_(input.view) {}

  std::vector<Remedy> run();

 private:
  const Finding& f_;
  const DiagnosisInput& in_;
  const ReportView& v_;
  std::vector<Remedy> out_;
  std::set<std::string> ids_;

  // A size for people: "1.5 GiB".
  static std::string bytes(double b);

  void add(const std::string& id, const std::string& text, const std::string& why);
  void add(const Remedy& r) { add(r.id, r.text, r.why); }
  Remedy* given(std::string_view id);
  // Gives the remedy `id`, when advised, its one-click action.
  void act(std::string_view id, RemedyAction action);
  // The action of a remedy that is an environment setting read when the framework starts:
  // a first cell that sets it before the framework is imported.
  static RemedyAction setting_cell(const std::string& name, const std::string& value,
                                   const std::string& framework);
  // What this kernel is told to change in its own framework's allocator settings (the advice
  // for other processes on the device then points at it instead of naming the settings again).
  [[nodiscard]] bool tf_growth_advised() const;
  [[nodiscard]] bool jax_preallocation_advised() const;
  // A signature whose remedy is a setting the kernel's environment already has.
  [[nodiscard]] bool setting_already_applied(const std::string& signature_id) const;
  [[nodiscard]] bool torch_segments_advised() const;
  [[nodiscard]] bool env_is(const std::string& name,
                            std::initializer_list<const char*> values) const;
  [[nodiscard]] bool tensorflow() const;
  [[nodiscard]] bool pytorch() const { return in_.loaded("torch") || hit_family("pytorch"); }
  [[nodiscard]] bool jax() const;
  [[nodiscard]] bool hit_family(const std::string& family) const;
  [[nodiscard]] bool hit_id(const std::string& id) const;
  [[nodiscard]] std::string growth_note() const;
  void working_set(const std::string& why_prefix);
  void framework_host_memory();
  // Keras is pure Python (nothing of it shows in the memory maps): the notebook's own code
  // says whether it is used.
  [[nodiscard]] bool keras_in_use() const;
  // Who else held the cgroup's memory: stopping them is the first fix.
  void cgroup_neighbours();
  void oom();
  // A size as --memory-limit takes it: "512M", "3G".
  static std::string option_size(std::int64_t b);
  void watchdog_limit();
  // The processes that held the device besides the kernel: stop them, or make them share.
  void other_gpu_processes();
  void gpu_oom();
  void gpu_fault();
  void shared_memory_advice();
  void cpu_advice();
  void native_crash_advice();
  void aborted();
  void killed_advice();
  void exited_advice();
  void hang_advice();
  void signatures();
  void incompatibilities();
  void unknown_advice();
};

}  // namespace kwd::diagnosis
