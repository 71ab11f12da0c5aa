#pragma once

#include <nlohmann/json.hpp>

#include "kwd/diagnosis/causes.hpp"
#include "kwd/diagnosis/signature_table.hpp"

namespace kwd::diagnosis {

// A pure function of the report: {cause (an id of causes()), headline, confidence, evidence:
// [{fact, pointer, line?}], remedies: [{id, text, why}], missing: [str], signatures: [...], table:
// {...}}. It claims no more than the facts in the report show, and lists the facts it lacked.
nlohmann::json diagnose(const nlohmann::json& report, const SignatureTable& table);
inline nlohmann::json diagnose(const nlohmann::json& report) {
  return diagnose(report, SignatureTable::active());
}

// What the supervisor calls last when it builds a report: adds `python_traceback` (unless a
// writer already did) and `diagnosis`. Never throws: a failure becomes a diagnosis of
// cause "unknown" that says what went wrong.
void complete_report(nlohmann::json& report);

// A stored report judged again by today's rules (`reports diagnose`): the writer's diagnosis
// and the traceback it found are set aside and found anew from the facts. Never throws.
nlohmann::json rediagnose(const nlohmann::json& stored);

}  // namespace kwd::diagnosis
