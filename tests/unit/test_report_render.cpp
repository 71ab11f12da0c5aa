#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "diagnosis_fixtures.hpp"
#include "kwd/diagnosis/diagnose.hpp"
#include "kwd/report/html_page.hpp"
#include "kwd/report/terminal_summary.hpp"

using nlohmann::json;
using namespace kwd::report;

namespace {

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++n;
  return n;
}

}  // namespace

TEST_CASE("reports show: the answer first, evidence, the crashing line, advice", "[render]") {
  const json report = kwd::test::recorded_segfault_report();
  const std::string out = render_summary(report, SummaryStyle{false, 100});
  std::istringstream lines(out);
  std::string first, second;
  std::getline(lines, first);
  std::getline(lines, second);
  CHECK_THAT(first, Catch::StartsWith("Kernel crash report"));
  CHECK(second == report["diagnosis"]["headline"].get<std::string>());
  CHECK_THAT(out, Catch::Contains("cause native_crash · confidence high"));
  CHECK_THAT(out, Catch::Contains("\nEvidence\n"));
  CHECK_THAT(out, Catch::Contains("> 3 |     return ctypes.string_at(0)"));
  CHECK_THAT(out, Catch::Contains("\nWhat to do\n"));
  CHECK_THAT(out, Catch::Contains("  1. Look at the call string_at()"));
  CHECK_THAT(out, Catch::Contains("Environment  python 3.11 · numpy 1.24.2"));
  CHECK(out.find("\x1b[") == std::string::npos);
  CHECK(count(out, "\n") <= 60);
  for (const auto& line : std::vector<std::string>{first, second})
    CHECK(line.size() <= 100);

  const std::string coloured = render_summary(report, SummaryStyle{true, 100});
  CHECK_THAT(coloured,
             Catch::Contains("\x1b[1;31m" + report["diagnosis"]["headline"].get<std::string>()));
}

TEST_CASE("reports show: a stripped driver's frames are one line, its function the next",
          "[render]") {
  // Recorded on an H200 (tests/gpu/scenarios.py crash_in_libcuda): nine unnamed frames of
  // libcuda, then the cuMemcpyHtoD_v2 they came through, then libffi's.
  std::ifstream in(std::filesystem::path(KWD_SOURCE_DIR) /
                   "tests/fixtures/gpu/ipykernel_crash_in_libcuda.json");
  const json report = kwd::diagnosis::rediagnose(json::parse(in));
  const std::string out = render_summary(report, SummaryStyle{false, 100});
  CHECK_THAT(out, Catch::Contains("Where it crashed\n"
                                  "  9 frames without a symbol (libcuda.so.580.159.04)\n"
                                  "  cuMemcpyHtoD_v2 (libcuda.so.580.159.04)\n"));
  CHECK(count(out, "?? (libcuda") == 0);
  // Eight lines at most, then what the report has beyond them.
  CHECK_THAT(out, Catch::Matches("[\\s\\S]*\\(([0-9]+) more frames in the report\\)[\\s\\S]*"));
}

TEST_CASE("reports show without a diagnosis or a cell still answers", "[render]") {
  const json bare = {{"id", "x"}, {"termination", {{"description", "killed by SIGKILL"}}}};
  const std::string out = render_summary(bare, SummaryStyle{});
  CHECK_THAT(out, Catch::Contains("Kernel killed by SIGKILL"));
}

TEST_CASE("the HTML page is self-contained, escaped, and shows every section", "[render]") {
  json report = kwd::test::recorded_segfault_report();
  report["stderr_tail"]["text"] =
      report["stderr_tail"]["text"].get<std::string>() + "<script>alert(1)</script>\n";
  report["custom_section"] = {{"from", "a newer writer"}};
  const std::string html = render_html(report);
  CHECK_THAT(html, Catch::Contains("Content-Security-Policy"));
  CHECK_THAT(html, Catch::Contains("default-src 'none'"));
  CHECK(html.find("<script") == std::string::npos);
  CHECK_THAT(html, Catch::Contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
  CHECK_FALSE(std::regex_search(html, std::regex(R"(\s(src|srcset|href)\s*=)")));
  for (const auto& [key, _] : report.items()) {
    if (key == "id" || key == "schema" || key == "schema_version" || key == "kind" ||
        key == "diagnosis")
      continue;
    const std::string id = key == "stderr_tail" ? "stderr" : key;
    INFO(key);
    CHECK_THAT(html, Catch::Contains("id=\"" + id + "\""));
  }
  CHECK_THAT(html, Catch::Contains("a newer writer"));
  CHECK_THAT(html, Catch::Contains("crashed here"));
}

TEST_CASE("the memory chart draws the series, the limit, the cells and the death", "[render]") {
  const json report = kwd::test::recorded_segfault_report();
  const std::string svg = render_memory_chart(report, 800, 300);
  std::smatch m;
  REQUIRE(std::regex_search(svg, m, std::regex(R"re(<path class="series rss" d="(M [^"]+)")re")));
  CHECK(count(m[1].str(), " L ") >= 4);
  CHECK_THAT(svg, Catch::Contains("died of SIGSEGV"));
  CHECK(count(svg, "<g class=\"cell\">") == 2);  // cell [1] and cell [2] in flight

  json limited = report;
  limited["memory"]["limits"]["tightest"] = {{"name", "cgroup"}, {"bytes", 300 * 1024 * 1024}};
  CHECK_THAT(render_memory_chart(limited, 800, 300), Catch::Contains("series limit"));

  const std::string nothing = render_memory_chart(json::object(), 800, 300);
  CHECK_THAT(nothing, Catch::Contains("no memory samples"));
  CHECK(nothing.find("<path") == std::string::npos);
}

// Found in the headless-Chromium screenshot: six evenly spaced ticks over 3 s read
// "−3 s, −2 s, −2 s, −1 s, −1 s, 0 s". Ticks are at round steps back from the death now.
TEST_CASE("the chart's time labels are each different, and round", "[render]") {
  for (const double span_s : {0.8, 3.0, 7.5, 42.0, 600.0, 5400.0}) {
    json report = kwd::test::recorded_segfault_report();
    const auto died = report["kernel"]["died_at_ms"].get<double>();
    json t = json::array(), rss = json::array();
    for (int i = 0; i <= 20; ++i) {
      t.push_back(died - span_s * 1000 * (20 - i) / 20);
      rss.push_back(100'000'000 + i * 1'000'000);
    }
    report["memory"]["samples"] = {{"t_ms", t}, {"rss", rss}};
    report["memory"].erase("older_samples");
    const std::string svg = render_memory_chart(report, 800, 300);
    std::vector<std::string> labels;
    const std::regex label(R"re(text-anchor="middle" font-size="11" fill="#57606a">([^<]+)<)re");
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), label);
         it != std::sregex_iterator(); ++it)
      labels.push_back((*it)[1].str());
    INFO("span " << span_s << " s: " << json(labels).dump());
    CHECK(labels.size() >= 3);
    CHECK(std::set<std::string>(labels.begin(), labels.end()).size() == labels.size());
    CHECK(labels.back() == "0 s");
  }
}

TEST_CASE("escape_html covers markup, quotes and control characters", "[render]") {
  CHECK(escape_html("<a href=\"x\">'&'</a>") ==
        "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  CHECK(escape_html(std::string("a\x01"
                                "b\n\tc")) ==
        "a\xEF\xBF\xBD"
        "b\n\tc");
}

// A report recorded on an H100 (tests/fixtures/gpu): a kernel of ~1 GiB RSS that took 20 GiB
// of GPU memory on a machine of 128 GiB, then aborted.
TEST_CASE("the HTML page speaks to people: the kernel's own scale, places and sizes in words",
          "[render]") {
  std::ifstream in(std::filesystem::path(KWD_SOURCE_DIR) / "tests/fixtures/gpu/hold20g_abort.json");
  const json report = json::parse(in);
  const std::string svg = render_memory_chart(report, 1040, 340);
  // The 128 GiB cgroup limit and the 79.6 GiB GPU would flatten the kernel into the axis.
  CHECK_THAT(svg, Catch::Contains("far above, not drawn: cgroup limit 128.0 GiB, GPU memory "));
  CHECK(svg.find("series limit") == std::string::npos);
  CHECK(svg.find("series cgroup_limit") == std::string::npos);
  CHECK_THAT(svg, Catch::Contains("20.6 GiB"));  // the top of the axis is the kernel's GPU peak

  const std::string page = render_html(report);
  CHECK_THAT(page, Catch::Contains("<th>seen in</th>"));
  // Where evidence was seen: the section's name, no JSON pointer (not even as a tooltip).
  CHECK_THAT(page, Catch::Contains("<td>how the kernel ended</td>"));
  CHECK(page.find("title=\"/termination") == std::string::npos);
  CHECK_THAT(page, Catch::Contains("the kernel&#39;s stderr, line 1") ||
                       Catch::Contains("the kernel's stderr, line 1"));
  CHECK(page.find("<code>/termination") == std::string::npos);
  CHECK_THAT(page, Catch::Contains("+76.7 MiB/s"));  // a slope, not 80407513.53297286
  CHECK_THAT(page, Catch::Contains(">22.7 s<"));     // time to the GPU's limit, rounded
}

TEST_CASE("reports show fits a narrow terminal: long notes and evidence wrap", "[render]") {
  json report = kwd::test::recorded_segfault_report();
  report["notes"] = json::array({std::string("--memory-limit 6.0 GiB not applied: cgroup v2: ") +
                                 "cannot enable the memory controller for children of " +
                                 "/sys/fs/cgroup/a/b/c because processes live in it; the " +
                                 "kernel runs without a memory limit"});
  const std::string text = render_summary(report, {.color = false, .width = 80});
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::size_t columns = 0;
    for (const char c : line)
      if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++columns;
    INFO(line);
    if (line.starts_with("  | ")) continue;  // the kernel's own lines: cut, checked elsewhere
    CHECK(columns <= 80);
  }
  CHECK_THAT(text, Catch::Contains("note: --memory-limit 6.0 GiB not applied"));
  CHECK_THAT(text, Catch::Contains("without a memory limit"));
}

TEST_CASE("reports show on an 80-column terminal breaks a kernel log line that is one word",
          "[render]") {
  json report = kwd::test::recorded_segfault_report();
  const std::string token =
      "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/"
      "process_api/026e1fa0b1b2404c94b1eec93d902062/kernel-watchdog-28218,task_memcg=/"
      "process_api/026e1fa0b1b2404c94b1eec93d902062/kernel-watchdog-28218,task=python3";
  auto& evidence = report["diagnosis"]["evidence"];
  evidence.insert(evidence.begin(), json{{"fact", "kernel log: " + token}});
  const auto widest = [](const std::string& text) {
    std::size_t most = 0;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      std::size_t columns = 0;
      for (const char c : line)
        if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++columns;
      most = std::max(most, columns);
    }
    return most;
  };
  const std::string terminal =
      render_summary(report, {.color = false, .width = 80, .clip_long_lines = true});
  CHECK(widest(terminal) <= 80);
  // Broken across lines, not cut: its pieces, joined, are the whole line.
  std::string joined;
  std::istringstream lines(terminal);
  bool in_token = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("kernel log: oom-kill") != std::string::npos) in_token = true;
    if (!in_token) continue;
    const auto start = line.find_first_not_of(" •");
    joined +=
        line.substr(line.find("oom-kill") != std::string::npos ? line.find("oom-kill") : start);
    if (joined.size() >= token.size()) break;
  }
  CHECK(joined == token);
  // Piped, nothing is broken: the line stays whole for grep.
  CHECK_THAT(render_summary(report, {.color = false, .width = 80, .clip_long_lines = false}),
             Catch::Contains(token));
}

TEST_CASE("the HTML page's lower half reads as sentences, the raw JSON one click away",
          "[render]") {
  const json segfault = kwd::test::recorded_segfault_report();
  const std::string page = render_html(segfault);
  const auto raw_at = page.find("<h2 id=\"raw\">");
  REQUIRE(raw_at != std::string::npos);
  const std::string words = page.substr(0, raw_at), raw = page.substr(raw_at);
  CHECK_THAT(words, Catch::Contains("The kernel was killed by SIGSEGV (signal 11), no core dump."));
  CHECK_THAT(words, Catch::Contains("Jupyter's kernel manager sees the return code -11."));
  CHECK_THAT(words, Catch::Contains("kernel-watchdog 0.1.0 watched it as process "));
  CHECK_THAT(words, Catch::Contains("The cells that ran before it, oldest first:"));
  CHECK_THAT(words, Catch::Contains(" before the death)"));
  // The report's field names are in the raw part only.
  for (const char* name : {"core_dumped", "returncode", "cell_in_flight", "died_at_ms"}) {
    INFO(name);
    CHECK(words.find(name) == std::string::npos);
    CHECK(raw.find(name) != std::string::npos);
  }
  CHECK_THAT(raw, Catch::Contains("<details id=\"raw-json\"><summary>"));
  CHECK_THAT(raw, Catch::Contains("&quot;core_dumped&quot;: false"));
}

TEST_CASE("the HTML page shows no epoch milliseconds and no JSON pointer outside its raw part",
          "[render]") {
  const auto fixture = [](const std::string& path) {
    std::ifstream in(std::filesystem::path(KWD_SOURCE_DIR) / path);
    json doc = json::parse(in);
    json report = doc.contains("report") ? doc["report"] : doc;
    kwd::diagnosis::complete_report(report);
    return report;
  };
  // Milliseconds since 1970 of the years 2017 to 2033, as a number of their own.
  const std::regex epoch_ms(R"((^|[^0-9.])1[5-9][0-9]{11}([^0-9]|$))");
  for (const char* path :
       {"tests/fixtures/diagnosis/recorded_segfault.json",
        "tests/fixtures/diagnosis/recorded_sigkill.json",
        "tests/fixtures/diagnosis/oom_cgroup_watchdog_limit.json",
        "tests/fixtures/diagnosis/oom_cgroup.json", "tests/fixtures/diagnosis/hang_blocked_io.json",
        "tests/fixtures/gpu/hold20g_abort.json"}) {
    INFO(path);
    const json report = fixture(path);
    const std::string page = render_html(report);
    const auto raw_at = page.find("<h2 id=\"raw\">");
    REQUIRE(raw_at != std::string::npos);
    const std::string words = page.substr(0, raw_at);
    std::smatch m;
    const bool epoch_shown = std::regex_search(words, m, epoch_ms);
    INFO("epoch number in: " << (epoch_shown ? words.substr(static_cast<std::size_t>(std::max<long>(
                                                                0, m.position(0) - 160)),
                                                            320)
                                             : std::string()));
    CHECK_FALSE(epoch_shown);
    std::set<std::string> pointers;
    for (const char* list : {"evidence", "signatures"})
      for (const auto& item : report["diagnosis"][list])
        pointers.insert(item.value("pointer", ""));
    CHECK_FALSE(pointers.empty());
    for (const auto& pointer : pointers) {
      if (pointer.empty()) continue;
      INFO("pointer " << pointer);
      CHECK(words.find("\"" + pointer) == std::string::npos);
      CHECK(words.find(">" + pointer) == std::string::npos);
      CHECK(words.find(" " + pointer) == std::string::npos);
      if (pointer.find('/', 1) != std::string::npos)
        CHECK(words.find(pointer) == std::string::npos);
    }
  }
  // The raw part has them: the test looks where they would be.
  const std::string sigkill =
      render_html(fixture("tests/fixtures/diagnosis/recorded_sigkill.json"));
  CHECK(std::regex_search(sigkill.substr(sigkill.find("<h2 id=\"raw\">")), epoch_ms));
  CHECK_THAT(sigkill,
             Catch::Contains("The kernel was killed by SIGKILL (signal 9), no core dump."));
  // A report about a cgroup the watchdog made says so, with the limit in words.
  const std::string oom =
      render_html(fixture("tests/fixtures/diagnosis/oom_cgroup_watchdog_limit.json"));
  CHECK_THAT(oom, Catch::Contains("made by kernel-watchdog for this kernel alone"));
  CHECK_THAT(oom, Catch::Contains("Its limit was 512"));
}
