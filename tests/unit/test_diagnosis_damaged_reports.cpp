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

// Found by the 10 M run of tests/fuzz/fuzz_diagnosis.cpp: a memory sample, a matched pid, a
// process-tree member's pid or an Xid event's pid that no int64 holds was converted anyway
// (UB) where the array items are read. Its reproducer is the report here; the rest below.
TEST_CASE("numbers no int64 holds in a report's arrays are not known, not converted") {
  std::ifstream in(std::string(KWD_SOURCE_DIR) +
                   "/tests/fuzz/corpus/diagnosis/crash_sample_out_of_int64_range.json");
  CHECK(kwd::diagnosis::diagnose(nlohmann::json::parse(in))["cause"].is_string());

  const auto report = nlohmann::json::parse(R"({
    "kernel": {"pid": 4242},
    "termination": {"kind": "signal", "signal": 9, "signal_name": "SIGKILL"},
    "memory": {"samples": {"rss": [1e300, -1e300, 1048576], "cgroup_usage": [5e40]}},
    "cgroup": {"limit": 2097152},
    "oom_evidence": {"matched_pids": [1e30, 4242.0], "kernel_log_readable": true},
    "process_tree": {"members": [{"pid": 1e300}, {"pid": 4243}]},
    "gpu": {"xid_events": [{"xid": 79, "device": 0, "pid": 1e300}]}})");
  const auto diagnosis = kwd::diagnosis::diagnose(report);
  CHECK(diagnosis["cause"].is_string());
  CHECK(kwd::diagnosis::integer_of(nlohmann::json(1e300)) == std::nullopt);
  CHECK(kwd::diagnosis::integer_of(nlohmann::json(4242.0)) == 4242);
  CHECK(kwd::diagnosis::integer_of(nlohmann::json("4242")) == std::nullopt);
}

// A stored python_traceback whose frames are of any shape (a line no int holds, a function
// that is a number, a frame that is a string) reads as what can be read.
TEST_CASE("a stored traceback of the wrong shape gives a diagnosis, not UB or a throw") {
  const auto report = nlohmann::json::parse(R"({
    "termination": {"kind": "signal", "signal": 11, "signal_name": "SIGSEGV"},
    "python_traceback": {"frames": [{"function": 5, "file": ["x"], "line": 1e300, "in_cell": "yes"},
                                    "not a frame", {"function": "f", "line": 7, "cell": "in flight",
                                    "in_cell": true}]}})");
  const auto diagnosis = kwd::diagnosis::diagnose(report);
  CHECK(diagnosis["cause"] == "native_crash");
  CHECK(diagnosis.dump().find("?() at ?:0") != std::string::npos);
}
