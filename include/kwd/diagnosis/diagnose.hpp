#pragma once

#include <nlohmann/json.hpp>

#include "kwd/diagnosis/signature_table.hpp"

namespace kwd::diagnosis {

// The causes a diagnosis can name (report field diagnosis.cause).
inline constexpr const char* kCauses[] = {"oom_killed_system",
                                          "oom_killed_cgroup",
                                          "gpu_out_of_memory",
                                          "gpu_driver_fault",
                                          "native_crash",
                                          "abort",
                                          "killed",
                                          "exited_with_error",
                                          "exited",
                                          "hang",
                                          "unknown"};

// A pure function of the report: {cause, headline, confidence, evidence: [{fact, pointer,
// line?}], remedies: [{id, text, why}], missing: [str], signatures: [...], table: {...}}.
// It claims no more than the facts in the report show, and lists the facts it lacked.
nlohmann::json diagnose(const nlohmann::json& report, const SignatureTable& table);
inline nlohmann::json diagnose(const nlohmann::json& report) {
  return diagnose(report, SignatureTable::active());
}

// What the supervisor calls last when it builds a report: adds `python_traceback` (unless a
// writer already did) and `diagnosis`. Never throws: a failure becomes a diagnosis of
// cause "unknown" that says what went wrong.
void complete_report(nlohmann::json& report);

}  // namespace kwd::diagnosis
