#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "kwd/diagnosis/diagnose.hpp"
#include "kwd/diagnosis/report_view.hpp"

using kwd::diagnosis::ReportView;

// Found by tests/fuzz/fuzz_diagnosis.cpp: a float no int64 holds, in a field read as an
// integer (a damaged or hand-edited stored report), was converted anyway (UB).
TEST_CASE("a report's integer that no int64 holds reads as not known") {
  const auto report = nlohmann::json::parse(R"({"cgroup": {"limit": 5.36222e50, "max_usage": -1e300,
                                                "current": 1048576.0}})");
  const ReportView view(report);
  CHECK_FALSE(view.integer("/cgroup/limit"));
  CHECK_FALSE(view.integer("/cgroup/max_usage"));
  CHECK(view.integer("/cgroup/current") == 1048576);
  const auto huge = nlohmann::json::parse(R"({"n": 18446744073709551615})");
  CHECK_FALSE(ReportView(huge).integer("/n"));
}

// Found by tests/fuzz/fuzz_diagnosis.cpp: 512 MiB of a 5-byte cgroup limit is 10737418240%,
// which was converted to an int (UB). Its reproducer is the report here.
TEST_CASE("absurd memory figures in a damaged report still give a diagnosis") {
  std::ifstream in(std::string(KWD_SOURCE_DIR) +
                   "/tests/fuzz/corpus/diagnosis/crash_percent_out_of_range.json");
  const auto report = nlohmann::json::parse(in);
  const auto diagnosis = kwd::diagnosis::diagnose(report);
  CHECK(diagnosis["cause"].is_string());
  CHECK(diagnosis.dump().find("(10737418240%)") != std::string::npos);
}
