// A stored report read back (`reports show` of a report written by another version, edited,
// or damaged) goes through the diagnosis: any JSON document must give a diagnosis, and
// complete_report must never throw on a report (a JSON object, which is all a store loads).
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "dump.hpp"
#include "kwd/diagnosis/diagnose.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto report = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (report.is_discarded()) return 0;
  const auto diagnosis = kwd::diagnosis::diagnose(report);
  (void)kwd::fuzz::dump(diagnosis);
  if (report.is_object()) {
    kwd::diagnosis::complete_report(report);  // never throws, by contract: a throw is a crash
    (void)kwd::fuzz::dump(report);
  }
  return 0;
}
