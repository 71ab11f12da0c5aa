// The crash report macOS writes itself (ReportCrash's .ips): read into a crash_stack, and the
// diagnosis naming the library and function from it as from the Linux crash handler's capture.
// The fixture is written in the documented format (tests/fixtures/stacks/README.md says how).
#include <catch2/catch.hpp>
#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "diagnosis_fixtures.hpp"
#include "kwd/diagnosis/diagnose.hpp"
#include "kwd/stacks/stacks_json.hpp"
#include "kwd/stacks/system_crash_report.hpp"

using namespace kwd::stacks;
using nlohmann::json;

namespace {

std::string fixture_text() {
  std::ifstream in(std::filesystem::path(KWD_SOURCE_DIR) / "tests" / "fixtures" / "stacks" /
                   "macos_segfault_in_library.ips");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The fixture's two documents, to be changed and put back together.
std::pair<json, json> fixture_documents() {
  const std::string text = fixture_text();
  const auto newline = text.find('\n');
  return {json::parse(text.substr(0, newline)), json::parse(text.substr(newline + 1))};
}

std::string ips_text(const json& metadata, const json& body) {
  return metadata.dump() + "\n" + body.dump(2) + "\n";
}

json diagnosis_with(const CrashStack& crash) {
  json report = kwd::test::recorded_segfault_report();
  report["crash_stack"] = to_json(crash);
  return kwd::diagnosis::rediagnose(report)["diagnosis"];
}

}  // namespace

TEST_CASE("a macOS crash report's faulting thread is read frame by frame") {
  const auto report = parse_ips_crash(fixture_text());
  REQUIRE(report);
  CHECK(report->pid == 48213);
  CHECK(report->process == "python3.12");
  CHECK(report->signal == SIGSEGV);
  CHECK(report->exception ==
        "EXC_BAD_ACCESS (SIGSEGV): KERN_INVALID_ADDRESS at 0x0000000000000000");
  CHECK(report->thread_id == 1844221);
  CHECK(report->pc == 0x101a3ff20ULL);
  CHECK(report->address == 0);
  REQUIRE(report->frames.size() == 8);
  const auto& top = report->frames[0];
  CHECK(top.pc == 0x101a3ff20ULL);  // the image's base plus the frame's offset in it
  CHECK(top.module == "/private/var/folders/xy/T/pytest-of-dev/libkwdcrash.dylib");
  CHECK(top.function == "kwd::native::poke(int*)");  // a mangled name is demangled
  CHECK(top.offset == 16);
  CHECK(report->frames[1].file == "crash.cpp");
  CHECK(report->frames[1].line == 12);
  // A frame the report could not name keeps its offset in the image.
  CHECK(report->frames[5].function.empty());
  CHECK(report->frames[5].offset == 0x6f10);
  CHECK(report->frames[5].module.ends_with("_ctypes.cpython-312-darwin.so"));
  CHECK(report->messages.empty());
}

TEST_CASE("the diagnosis names the library and function of a macOS crash") {
  const auto report = parse_ips_crash(fixture_text());
  REQUIRE(report);
  auto stack = crash_stack_from(*report);
  stack.system_report = "/Users/dev/Library/Logs/DiagnosticReports/python3.12-2026-11-30.ips";
  CHECK(stack.fault.pc == stack.frames[0].pc);
  const json j = to_json(stack);
  CHECK(j["tid"] == 1844221);
  CHECK(j["si_code"].is_null());  // the system's report says none
  CHECK(j["pc"] == "0x101a3ff20");
  CHECK(j["system_report"] == stack.system_report);
  const json d = diagnosis_with(stack);
  CHECK(d["cause"] == "native_crash");
  CHECK_THAT(d["headline"].get<std::string>(),
             Catch::Contains("in kwd::native::poke(int*) in libkwdcrash.dylib"));
}

TEST_CASE("an abort's report: libSystem's frames are passed over and its message is evidence") {
  auto [metadata, body] = fixture_documents();
  body["exception"] = {{"type", "EXC_CRASH"}, {"signal", "SIGABRT"}, {"codes", "0x0, 0x0"}};
  body["asi"] = {{"libsystem_c.dylib", {"abort() called"}}};
  auto& frames = body["threads"][0]["frames"];
  // __pthread_kill, an unnamed frame of the same library, pthread_kill: above the library's
  // frame, as an abort() shows.
  const json added = json::array(
      {json::object({{"imageOffset", 0x9764}, {"imageIndex", 4}, {"symbol", "__pthread_kill"}}),
       json::object({{"imageOffset", 0x7300}, {"imageIndex", 4}}),
       json::object({{"imageOffset", 0x5f70}, {"imageIndex", 5}, {"symbol", "pthread_kill"}})});
  frames.insert(frames.begin(), added.begin(), added.end());
  const std::uint64_t kernel_base = body["usedImages"][4]["base"];
  body["threads"][0]["threadState"]["pc"]["value"] = kernel_base + 0x9764;

  const auto report = parse_ips_crash(ips_text(metadata, body));
  REQUIRE(report);
  CHECK(report->signal == SIGABRT);
  REQUIRE(report->messages.size() == 1);
  CHECK(report->messages[0] == "libsystem_c.dylib: abort() called");
  const json d = diagnosis_with(crash_stack_from(*report));
  CHECK_THAT(d["headline"].get<std::string>(),
             Catch::Contains("in kwd::native::poke(int*) in libkwdcrash.dylib") &&
                 !Catch::Contains("pthread_kill"));
  bool said = false;
  for (const auto& e : d["evidence"])
    said =
        said || (e["fact"] == "the system's crash report says: libsystem_c.dylib: abort() called" &&
                 e["pointer"] == "/crash_stack/messages/0");
  CHECK(said);
}

TEST_CASE("the faulting thread is the triggered one when the report has no index") {
  auto [metadata, body] = fixture_documents();
  body.erase("faultingThread");
  std::swap(body["threads"][0], body["threads"][1]);
  const auto report = parse_ips_crash(ips_text(metadata, body));
  REQUIRE(report);
  CHECK(report->thread_id == 1844221);
  CHECK(report->frames.size() == 8);
  // A "triggered" that is not a boolean marks nothing, and throws nothing.
  body["threads"][1]["triggered"] = 1;
  const auto odd = parse_ips_crash(ips_text(metadata, body));
  REQUIRE(odd);
  CHECK(odd->frames.empty());
  CHECK(odd->thread_id == 0);
}

TEST_CASE("what is not a crash report, or is damaged, is no crash report") {
  auto [metadata, body] = fixture_documents();
  CHECK_FALSE(parse_ips_crash(""));
  CHECK_FALSE(parse_ips_crash(metadata.dump()));                          // the metadata alone
  CHECK_FALSE(parse_ips_crash(ips_text(metadata, body).substr(0, 900)));  // cut short
  json hang = metadata;
  hang["bug_type"] = "288";  // a stackshot, not a crash
  CHECK_FALSE(parse_ips_crash(ips_text(hang, body)));
  json no_pid = body;
  no_pid.erase("pid");
  CHECK_FALSE(parse_ips_crash(ips_text(metadata, no_pid)));
  // Fields of the wrong type are left out, not trusted.
  json odd = body;
  odd["threads"][0]["frames"][0]["imageIndex"] = 99;
  odd["threads"][0]["frames"][1]["imageIndex"] = "one";
  odd["usedImages"][0] = "not an image";
  odd["asi"] = {{"libsystem_c.dylib", "not a list"}};
  odd["threads"][0]["threadState"]["far"]["value"] = 0x10;  // the address is the state's far
  const auto report = parse_ips_crash(ips_text(metadata, odd));
  REQUIRE(report);
  CHECK(report->frames[0].module.empty());
  CHECK(report->frames[0].pc == 0x3f20);
  CHECK(report->frames[1].module.empty());
  CHECK(report->messages.empty());
  CHECK(report->address == 0x10);
}

TEST_CASE("an .ips file is told a crash, another kind of report, or not readable yet") {
  auto [metadata, body] = fixture_documents();
  CHECK(ips_kind(fixture_text()) == IpsKind::crash);
  json hang = metadata;
  hang["bug_type"] = "288";
  CHECK(ips_kind(ips_text(hang, body)) == IpsKind::other);
  CHECK(ips_kind("{\"bug_type\":") == IpsKind::unreadable);  // still being written
  CHECK(ips_kind("") == IpsKind::unreadable);
}

TEST_CASE("a crash stack is capped, and an empty thread says so") {
  const auto report = parse_ips_crash(fixture_text());
  REQUIRE(report);
  const auto capped = crash_stack_from(*report, 3);
  CHECK(capped.frames.size() == 3);
  CHECK(capped.truncated);
  auto bare = *report;
  bare.frames.clear();
  CHECK_FALSE(crash_stack_from(bare).missing.empty());
}

TEST_CASE("a report that never came says so, with the pid and how long it was waited for") {
  SystemCrashReportSearch search;
  search.pid = 4321;
  search.signal = SIGSEGV;
  const auto none = system_crash_report_not_found(search, std::chrono::milliseconds(3000));
  CHECK(none.frames.empty());
  CHECK(none.fault.signal == SIGSEGV);
  CHECK(none.capture_ms == 3000);
  CHECK_THAT(none.missing, Catch::Contains("pid 4321") && Catch::Contains("3000 ms"));
  CHECK(to_json(none)["tid"].is_null());  // no thread was named
}
