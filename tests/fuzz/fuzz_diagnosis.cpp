// A stored report read back (`reports show` of a report written by another version, edited,
// or damaged) goes through the diagnosis: any JSON document must give a diagnosis, and
// complete_report must never throw on a report (a JSON object, which is all a store loads).
// The same document stands for a failed cell's facts too (its error, stderr and the watch's
// sections, whatever their shape): explaining a cell never throws either.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "dump.hpp"
#include "kwd/diagnosis/cell_failure.hpp"
#include "kwd/diagnosis/diagnose.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto report = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (report.is_discarded()) return 0;
  const auto diagnosis = kwd::diagnosis::diagnose(report);
  (void)kwd::fuzz::dump(diagnosis);
  if (report.is_object()) {
    kwd::diagnosis::CellFailureFacts facts;
    const auto text = [&](const char* key) {
      const auto it = report.find(key);
      return it != report.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    facts.ename = text("ename");
    facts.evalue = text("evalue");
    facts.traceback = text("traceback");
    facts.stderr_text = text("stderr");
    facts.watch = report;
    if (const auto f = kwd::diagnosis::explain_cell_failure(facts))
      (void)kwd::fuzz::dump(f->headline);
    kwd::diagnosis::complete_report(report);  // never throws, by contract: a throw is a crash
    (void)kwd::fuzz::dump(report);
  }
  return 0;
}
