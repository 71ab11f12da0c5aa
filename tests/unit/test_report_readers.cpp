// The report readers never fail: the terminal summary, the HTML page and the rows of
// `reports list` over every report fixture, and over copies of each broken the ways a writer,
// an older version or a disk can break them. A file that cannot be read is refused in one line.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "kwd/diagnosis/diagnose.hpp"
#include "kwd/diagnosis/report_view.hpp"
#include "kwd/report/html_page.hpp"
#include "kwd/report/report_document.hpp"
#include "kwd/report/report_file.hpp"
#include "kwd/report/report_listing.hpp"
#include "kwd/report/terminal_summary.hpp"
#include "kwd/report/terminal_text.hpp"
#include "kwd/util/clock.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace kwd::report;
using kwd::test::TempDir;

namespace {

const fs::path kSource(KWD_SOURCE_DIR);

json read_json(const fs::path& file) {
  std::ifstream in(file);
  return json::parse(in);
}

// Every report there is: the diagnosis fixtures, completed as the supervisor completes them,
// and the reports recorded on a real GPU machine when this checkout sits beside shared/gpu.
std::vector<std::pair<std::string, json>> corpus() {
  std::vector<std::pair<std::string, json>> reports;
  for (const auto& e : fs::directory_iterator(kSource / "tests/fixtures/diagnosis")) {
    if (e.path().extension() != ".json") continue;
    json report = read_json(e.path())["report"];
    kwd::diagnosis::complete_report(report);
    reports.emplace_back(e.path().stem().string(), std::move(report));
  }
  std::error_code ec;
  const fs::path gpu = kSource.parent_path() / "shared/gpu/fixtures";
  if (fs::is_directory(gpu, ec))
    for (const auto& e : fs::directory_iterator(gpu))
      if (e.path().extension() == ".json")
        reports.emplace_back("gpu/" + e.path().stem().string(), read_json(e.path()));
  std::sort(reports.begin(), reports.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return reports;
}

// Where to break a report: every member and item (of an array, the first and the last item).
void collect_places(const json& value, const json::json_pointer& at,
                    std::vector<json::json_pointer>& places) {
  if (value.is_object()) {
    for (const auto& [key, item] : value.items()) {
      places.push_back(at / key);
      collect_places(item, at / key, places);
    }
  } else if (value.is_array() && !value.empty()) {
    for (std::size_t i : {std::size_t{0}, value.size() - 1}) {
      places.push_back(at / i);
      collect_places(value[i], at / i, places);
      if (value.size() == 1) break;
    }
  }
}

json wrong_type(const json& v) {
  if (v.is_string()) return 42;
  if (v.is_number()) return "not a number";
  if (v.is_boolean()) return "yes";
  if (v.is_object()) return json::array({1, "two"});
  if (v.is_array()) return json{{"not", "a list"}};
  return json{{"unexpected", 1}};
}

// Every string replaced by text that would take over a terminal.
const std::string kHostile =
    "title\x1b]0;pwned\x07 clip\x1b]52;c;ZXZpbA==\x07 clear\x1b[2J\x1b[H c1\xc2\x9b"
    "31m del\x7f cr\rbell\x07 end";

void replace_all(json& v, const std::function<void(json&)>& leaf) {
  if (v.is_object() || v.is_array()) {
    for (auto& item : v)
      replace_all(item, leaf);
  } else {
    leaf(v);
  }
}

struct Mutant {
  std::string what;
  json document;
};

std::vector<Mutant> mutants_of(const json& report) {
  std::vector<Mutant> out;
  std::vector<json::json_pointer> places;
  collect_places(report, json::json_pointer(), places);
  for (const auto& at : places) {
    const json& original = report[at];
    json nulled = report;
    nulled[at] = nullptr;
    out.push_back({at.to_string() + " = null", std::move(nulled)});
    json wrong = report;
    wrong[at] = wrong_type(original);
    out.push_back({at.to_string() + " of the wrong type", std::move(wrong)});
    if (original.is_array() && !original.empty()) {
      json numbers = report;
      for (auto& item : numbers[at])
        item = 7;
      out.push_back({at.to_string() + " items are numbers", std::move(numbers)});
    }
  }
  for (const auto& [key, _] : report.items()) {
    json removed = report;
    removed.erase(key);
    out.push_back({"without " + key, std::move(removed)});
  }
  const std::vector<std::pair<std::string, json>> numbers{
      {"huge", 1e308}, {"negative", -1}, {"unsigned max", std::uint64_t{18446744073709551615u}}};
  // Not a structured binding: clang 14 (the sanitizer build's) cannot capture one.
  for (const auto& name_and_number : numbers) {
    const json& number = name_and_number.second;
    json extreme = report;
    replace_all(extreme, [&](json& v) {
      if (v.is_number()) v = number;
    });
    out.push_back({"every number " + name_and_number.first, std::move(extreme)});
  }
  json hostile = report;
  replace_all(hostile, [](json& v) {
    if (v.is_string()) v = kHostile;
  });
  out.push_back({"every string hostile", std::move(hostile)});
  return out;
}

// The text without our own colour codes (SGR: ESC [ digits ; m). A scan, not std::regex,
// which took a fifth of this file's time over ~20,000 broken reports (166 s, now 136).
std::string without_colour_codes(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b' && i + 1 < text.size() && text[i + 1] == '[') {
      std::size_t j = i + 2;
      while (j < text.size() && ((text[j] >= '0' && text[j] <= '9') || text[j] == ';'))
        ++j;
      if (j < text.size() && text[j] == 'm') {
        i = j;
        continue;
      }
    }
    out += text[i];
  }
  return out;
}

// Only our own colour codes may reach the terminal.
bool only_own_escapes(const std::string& text) {
  const std::string stripped = without_colour_codes(text);
  return std::none_of(stripped.begin(), stripped.end(),
                      [](char c) {
                        const auto u = static_cast<unsigned char>(c);
                        return (u < 0x20 && c != '\n' && c != '\t') || u == 0x7f;
                      }) &&
         stripped.find("\xc2\x9b") == std::string::npos;
}

// What `reports show`, `show --json`, `html` and `list` do with a document; the exception text
// when one of them throws, else "".
std::string reader_failure(const json& document) {
  try {
    json shown = document;
    if (!kwd::diagnosis::ReportView(shown).object("/diagnosis"))
      kwd::diagnosis::complete_report(shown);
    const auto plain = render_summary(shown, SummaryStyle{false, 100});
    const auto coloured = render_summary(shown, SummaryStyle{true, 50});
    if (!only_own_escapes(plain) || plain.find('\x1b') != std::string::npos)
      return "terminal controls in the summary";
    if (!only_own_escapes(coloured)) return "terminal controls in the coloured summary";
    const auto html = render_html(shown);
    if (html.find('\x1b') != std::string::npos) return "ESC in the HTML page";
    (void)to_text(document, 2);
    // The rules read report data through the tolerant view: no field breaks them.
    const json again = kwd::diagnosis::rediagnose(document);
    if (const auto missing = kwd::diagnosis::ReportView(again).text("/diagnosis/missing/0");
        missing && missing->starts_with("diagnosis: "))
      return "the diagnosis failed: " + *missing;
    const StoredReport stored{"r", "/reports/r.json", 1'700'000'000'000};
    if (!only_own_escapes(format_list_row(list_row(stored, document))))
      return "terminal controls in the list row";
    return "";
  } catch (const std::exception& e) {
    return std::string("threw: ") + e.what();
  }
}

json fixture_report(const std::string& name) {
  json report = read_json(kSource / "tests/fixtures/diagnosis" / (name + ".json"))["report"];
  kwd::diagnosis::complete_report(report);
  return report;
}

std::string deep_nesting(std::size_t depth) {
  return "{\"id\": \"deep\", \"x\": " + std::string(depth, '[') + std::string(depth, ']') + "}";
}

}  // namespace

TEST_CASE("the readers' check strips our colour codes and nothing else", "[readers]") {
  CHECK(without_colour_codes("a\x1b[1;31mb\x1b[0mc\x1b[m") == "abc");
  CHECK(without_colour_codes("\x1b[2J\x1b[H\x1b]0;t\x07\x1b[31") ==
        "\x1b[2J\x1b[H\x1b]0;t\x07\x1b[31");
  CHECK(only_own_escapes("\x1b[1mbold\x1b[0m\n\tok"));
  CHECK_FALSE(only_own_escapes("\x1b[1mbold\x1b[2J"));
  CHECK_FALSE(
      only_own_escapes("csi \xc2\x9b"
                       "31m"));
  CHECK_FALSE(only_own_escapes("\xc2\x1b[0m\x9b"));  // a C1 CSI that the stripping joins
}

TEST_CASE("no reader throws on any fixture or any broken copy of one", "[readers]") {
  // Under the sanitizers (scripts/sanitize.sh sets the stride to 5) every fixture whole and a
  // fifth of its broken copies, a different fifth from one fixture to the next, so that every
  // way of breaking a report is still tried: the instrumented readers took 313 s over all
  // ~20,000 in CI, the tail of the sanitizer stage. The normal build reads every copy.
  const char* stride_text = std::getenv("KWD_SANITIZER_STRIDE");
  const std::size_t stride = static_cast<std::size_t>(
      std::clamp(stride_text != nullptr ? std::atoi(stride_text) : 1, 1, 10));
  const auto reports = corpus();
  REQUIRE(reports.size() >= 30);
  std::size_t checked = 0;
  for (std::size_t r = 0; r < reports.size(); ++r) {
    const auto& [name, report] = reports[r];
    INFO(name);
    REQUIRE(reader_failure(report).empty());
    const auto mutants = mutants_of(report);
    for (std::size_t m = r % stride; m < mutants.size(); m += stride) {
      const auto failure = reader_failure(mutants[m].document);
      if (!failure.empty()) FAIL_CHECK(name << ", " << mutants[m].what << ": " << failure);
      ++checked;
    }
  }
  CHECK(checked > 5000 / stride);
}

TEST_CASE("known reader failures, each as it was found", "[readers]") {
  SECTION("reports list: a hang report has kernel.died_at null") {
    json hang = fixture_report("hang_few_misses");
    hang["kernel"]["died_at"] = nullptr;
    hang["kernel"]["died_at_ms"] = nullptr;
    const auto row = list_row(StoredReport{"h", "/r/h.json", 5}, hang);
    CHECK(row.readable);
    CHECK(row.at_ms == 1700000006000);
    CHECK(row.when == kwd::util::local_wall_time(1700000006000));
    CHECK(row.cause == hang["diagnosis"]["headline"].get<std::string>());
  }
  SECTION("reports show: a kernel started without a connection file") {
    json report = fixture_report("recorded_abort");
    report["kernel"]["connection_file"] = nullptr;
    report["kernel"]["kernel_id"] = nullptr;
    CHECK(reader_failure(report).empty());
    const auto row = list_row(StoredReport{"a", "/r/a.json", 5}, report);
    CHECK(row.kernel == "pid " + report["kernel"]["pid"].dump());
  }
  SECTION("cell code null, termination null, a number for a string, evidence as numbers") {
    json report = fixture_report("recorded_segfault");
    report["execution"]["cell_in_flight"]["code"] = nullptr;
    report["termination"] = nullptr;
    report["kernel"]["died_at"] = 1234;
    report["diagnosis"]["headline"] = 5;
    report["diagnosis"]["evidence"] = {1, 2, 3};
    report["diagnosis"]["missing"] = {4, nullptr};
    CHECK(reader_failure(report).empty());
    const auto summary = render_summary(report, SummaryStyle{});
    CHECK_THAT(summary, Catch::Contains("  • 1\n"));
  }
  SECTION("reports html: a time in milliseconds that no int64 holds (fuzz_report, 10 M run)") {
    for (const char* name :
         {"crash_time_out_of_int64_range", "crash_cell_time_out_of_int64_range"}) {
      std::ifstream in(std::string(KWD_SOURCE_DIR) + "/tests/fuzz/corpus/report/" + name + ".json");
      CHECK(reader_failure(json::parse(in)).empty());
    }
    json hang = fixture_report("hang_few_misses");
    hang["hang"]["detected_at_ms"] = 1.4e115;
    hang["heartbeat"]["last_beat_ms"] = -1e300;
    CHECK(reader_failure(hang).empty());
    CHECK_THAT(kwd::report::render_html(hang), Catch::Contains("1.4e+115"));
  }
}

TEST_CASE("reports list: newest death first, a hang by its detection, else the file time",
          "[readers]") {
  TempDir store("kwd-readers");
  const auto with_death = [](std::int64_t ms) {
    json r = fixture_report("recorded_sigkill");
    r["kernel"]["died_at_ms"] = ms;
    return r.dump();
  };
  // Names in the opposite order of the deaths: the name does not decide.
  store.write("a-newest.json", with_death(3'000'000'000'000));
  store.write("z-oldest.json", with_death(1'000'000'000'000));
  json hang = fixture_report("hang_few_misses");
  hang["hang"]["detected_at_ms"] = 2'000'000'000'000;
  store.write("m-hang.json", hang.dump());
  // No time of its own: its file time (now) puts it between the hang (2033) and 2001.
  store.write("b-untimed.json", json{{"id", "untimed"}}.dump());
  const auto rows = list_reports(ReportStore(store.path));
  std::vector<std::string> order;
  for (const auto& row : rows)
    order.push_back(row.stored.id);
  CHECK(order == std::vector<std::string>{"a-newest", "m-hang", "b-untimed", "z-oldest"});
}

TEST_CASE("reports list: a file it cannot read is one row saying why, the rest are listed",
          "[readers]") {
  TempDir store("kwd-readers");
  store.write("20260101T000000Z-good-1.json", fixture_report("recorded_segfault").dump());
  store.write("20260101T000001Z-garbage-2.json", "{not json");
  store.write("20260101T000002Z-deep-3.json", deep_nesting(100'000));
  store.write("20260101T000003Z-array-4.json", "[1, 2]");
  const auto rows = list_reports(ReportStore(store.path));
  REQUIRE(rows.size() == 4);
  std::map<std::string, const ListedReport*> by_id;
  for (const auto& row : rows)
    by_id[row.stored.id] = &row;
  CHECK(by_id.at("20260101T000000Z-good-1")->readable);
  CHECK_THAT(by_id.at("20260101T000001Z-garbage-2")->cause,
             Catch::StartsWith("unreadable: not valid JSON"));
  CHECK_THAT(by_id.at("20260101T000002Z-deep-3")->cause,
             Catch::Contains("nested deeper than 64 levels"));
  CHECK_THAT(by_id.at("20260101T000003Z-array-4")->cause, Catch::Contains("not a JSON object"));
  for (const auto& row : rows) {
    const auto line = format_list_row(row);
    CHECK(std::count(line.begin(), line.end(), '\n') == 1);
    CHECK_THAT(line, Catch::EndsWith(row.stored.path.string() + "\n"));
  }
}

TEST_CASE("report files: depth and size limits, one line naming the file", "[readers]") {
  TempDir dir("kwd-readers");
  const auto deep = dir.write("deep.json", deep_nesting(100'000));
  const auto file = read_report_file(deep);
  CHECK_FALSE(file.document);
  CHECK(file.problem() ==
        deep.string() + ": nested deeper than 64 levels; not read as a kernel-watchdog report");

  // Just inside the limit: the report object is level 0.
  const auto fine = dir.write("fine.json", deep_nesting(kMaxReportDepth - 1));
  CHECK(read_report_file(fine).document);
  CHECK_FALSE(read_report_file(dir.write("over.json", deep_nesting(kMaxReportDepth))).document);

  const auto big = dir.path / "big.json";
  { std::ofstream(big) << "{}"; }
  fs::resize_file(big, kMaxReportBytes + 1);
  CHECK_THAT(read_report_file(big).problem(), Catch::Contains("big.json: larger than 64 MiB"));
  CHECK_THAT(read_report_file(dir.path / "absent.json").problem(), Catch::Contains("cannot open"));
  CHECK_THAT(read_report_file(dir.path).problem(), Catch::Contains("not a regular file"));
  REQUIRE(::mkfifo((dir.path / "fifo.json").c_str(), 0600) == 0);
  CHECK_THAT(read_report_file(dir.path / "fifo.json").problem(),
             Catch::Contains("not a regular file"));
}

TEST_CASE("terminal_safe: no control sequence gets through, text does", "[readers]") {
  CHECK(terminal_safe("\x1b]0;title\x07") == "\xEF\xBF\xBD]0;title\xEF\xBF\xBD");
  CHECK(terminal_safe("\x1b]52;c;ZXZpbA==\x1b\\") == "\xEF\xBF\xBD]52;c;ZXZpbA==\xEF\xBF\xBD\\");
  CHECK(terminal_safe("\x1b[2J") == "\xEF\xBF\xBD[2J");
  CHECK(terminal_safe("a\xc2\x9b"
                      "31mb") ==
        "a\xEF\xBF\xBD"
        "31mb");  // C1 CSI: one U+FFFD
  CHECK(terminal_safe("del\x7f") == "del\xEF\xBF\xBD");
  CHECK(terminal_safe("tab\tnew\nline\r\n") == "tab\tnew\nline\n");
  CHECK(terminal_safe("progress\rdone") ==
        "progress\xEF\xBF\xBD"
        "done");
  CHECK(terminal_safe("é · ✓ 🚀 \xc2\xa0") == "é · ✓ 🚀 \xc2\xa0");
  CHECK(terminal_safe("bad\xff\xc3") == "bad\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(terminal_safe(std::string("nul\0x", 5)) == "nul\xEF\xBF\xBDx");
}

TEST_CASE("reports show: kernel text reaches the terminal without its control sequences",
          "[readers]") {
  json report = fixture_report("recorded_segfault");
  report["stderr_tail"]["text"] = "before\n\x1b]0;pwned\x07\x1b]52;c;ZXZpbA==\x07\x1b[2Jafter\n";
  report["execution"]["cell_in_flight"]["code"] = "x = 1\n\x1b[31mred\x1b[0m\n";
  report["diagnosis"]["evidence"][0]["fact"] = "fact \x1b[H\x1b[2J";
  report["diagnosis"]["headline"] =
      "headline \xc2\x9b"
      "2J";
  const auto plain = render_summary(report, SummaryStyle{false, 100});
  CHECK(plain.find('\x1b') == std::string::npos);
  CHECK(plain.find('\x07') == std::string::npos);
  CHECK(plain.find("\xc2\x9b") == std::string::npos);
  CHECK_THAT(plain, Catch::Contains("]52;c;ZXZpbA=="));  // shown, harmless
  CHECK_THAT(plain, Catch::Contains("after"));
  const auto coloured = render_summary(report, SummaryStyle{true, 100});
  CHECK(only_own_escapes(coloured));
  CHECK_THAT(coloured, Catch::Contains("\x1b[1;31m"));  // our own colours stay
  CHECK(render_html(report).find('\x1b') == std::string::npos);
}
