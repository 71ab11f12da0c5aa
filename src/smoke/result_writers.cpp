#include "kwd/smoke/result_writers.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "kwd/report/html_page.hpp"
#include "kwd/report/terminal_text.hpp"
#include "kwd/stacks/stacks_json.hpp"
#include "kwd/util/size_parse.hpp"

namespace kwd::smoke {
namespace {

// XML 1.0 allows no C0 controls but tab and newlines: terminal_safe turns them (and bytes
// that are not UTF-8) into U+FFFD; the HTML escapes of the five special characters are
// XML's too.
std::string xml_text(std::string_view raw) {
  return report::escape_html(report::terminal_safe(raw));
}

std::string bytes_or_dash(const std::optional<std::int64_t>& bytes) {
  return bytes ? util::format_bytes(static_cast<double>(*bytes)) : "-";
}

std::string testcase_name(const CellResult& cell) {
  return "cell " + std::to_string(cell.number) + ": " + cell.first_line;
}

// Annotation properties and messages: GitHub's workflow-command escaping.
std::string github_escape(std::string_view text, bool property) {
  std::string out;
  for (char c : report::terminal_safe(text)) {
    if (c == '%')
      out += "%25";
    else if (c == '\r')
      out += "%0D";
    else if (c == '\n')
      out += "%0A";
    else if (property && c == ':')
      out += "%3A";
    else if (property && c == ',')
      out += "%2C";
    else
      out += c;
  }
  return out;
}

std::string first_lines(const std::string& text, std::size_t max_lines) {
  std::istringstream in(text);
  std::string line, out;
  std::size_t n = 0;
  while (std::getline(in, line) && n < max_lines) {
    out += line + "\n";
    ++n;
  }
  return out;
}

std::string cause_of(const NotebookResult& r) {
  if (r.outcome == Outcome::died) return r.cause;
  const CellResult* failed = r.first_failure();
  return failed != nullptr ? failed->failure_type : "";
}

}  // namespace

std::string junit_xml(const std::vector<NotebookResult>& results) {
  std::ostringstream out;
  std::size_t tests = 0, failures = 0, skipped = 0;
  double seconds = 0;
  for (const auto& r : results) {
    tests += r.cells.size();
    failures += r.count(CellStatus::failed);
    skipped += r.count(CellStatus::skipped) + r.count(CellStatus::not_run);
    seconds += r.seconds;
  }
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out << fmt::format(
      "<testsuites name=\"kernel-watchdog smoke\" tests=\"{}\" failures=\"{}\" errors=\"0\" "
      "skipped=\"{}\" time=\"{:.3f}\">\n",
      tests, failures, skipped, seconds);
  for (const auto& r : results) {
    const std::string suite = xml_text(r.path.string());
    out << fmt::format(
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" "
        "time=\"{:.3f}\">\n",
        suite, r.cells.size(), r.count(CellStatus::failed),
        r.count(CellStatus::skipped) + r.count(CellStatus::not_run), r.seconds);
    out << "    <properties>\n";
    out << fmt::format("      <property name=\"kernel\" value=\"{}\"/>\n", xml_text(r.kernel_name));
    out << fmt::format("      <property name=\"outcome\" value=\"{}\"/>\n",
                       xml_text(outcome_name(r.outcome)));
    if (r.report)
      out << fmt::format("      <property name=\"crash_report\" value=\"{}\"/>\n",
                         xml_text(r.report->string()));
    if (r.scheduling) {
      if (r.scheduling->estimate)
        out << fmt::format("      <property name=\"estimate_bytes\" value=\"{}\"/>\n",
                           *r.scheduling->estimate);
      out << fmt::format("      <property name=\"wait_s\" value=\"{:.3f}\"/>\n",
                         r.scheduling->wait_s);
      out << fmt::format("      <property name=\"requeues\" value=\"{}\"/>\n",
                         r.scheduling->requeues.size());
      if (!r.scheduling->gpu.empty())
        out << fmt::format("      <property name=\"gpu\" value=\"{}\"/>\n",
                           xml_text(r.scheduling->gpu));
    }
    out << "    </properties>\n";
    std::set<std::string> names;
    for (const auto& cell : r.cells) {
      std::string name = testcase_name(cell);
      // Unique within the suite: two cells with the same first line get their number twice.
      if (!names.insert(name).second) name += " (" + std::to_string(cell.number) + ")";
      out << fmt::format("    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3f}\">\n", suite,
                         xml_text(name), cell.seconds);
      if (cell.peak_rss || cell.peak_gpu) {
        out << "      <properties>\n";
        if (cell.peak_rss)
          out << fmt::format("        <property name=\"peak_rss_bytes\" value=\"{}\"/>\n",
                             *cell.peak_rss);
        if (cell.peak_gpu)
          out << fmt::format("        <property name=\"peak_gpu_bytes\" value=\"{}\"/>\n",
                             *cell.peak_gpu);
        out << "      </properties>\n";
      }
      if (cell.status == CellStatus::failed) {
        out << fmt::format("      <failure type=\"{}\" message=\"{}\">{}</failure>\n",
                           xml_text(cell.failure_type), xml_text(cell.message),
                           xml_text(cell.details));
      } else if (cell.status != CellStatus::passed) {
        out << fmt::format(
            "      <skipped message=\"{}\"/>\n",
            xml_text(std::string(cell_status_name(cell.status)) + ": " + cell.message));
      }
      out << "    </testcase>\n";
    }
    out << "  </testsuite>\n";
  }
  out << "</testsuites>\n";
  return out.str();
}

nlohmann::json results_json(const std::vector<NotebookResult>& results) {
  nlohmann::json notebooks = nlohmann::json::array();
  for (const auto& r : results) {
    nlohmann::json cells = nlohmann::json::array();
    for (const auto& c : r.cells) {
      nlohmann::json cell = {{"number", c.number},
                             {"first_line", c.first_line},
                             {"status", cell_status_name(c.status)},
                             {"seconds", c.seconds}};
      if (!c.failure_type.empty()) cell["failure_type"] = c.failure_type;
      if (!c.message.empty()) cell["message"] = c.message;
      if (!c.cause.empty()) {
        cell["cause"] = c.cause;
        cell["headline"] = c.headline;
        cell["evidence"] = c.evidence;
        nlohmann::json remedies = nlohmann::json::array();
        for (const auto& [id, text] : c.remedies)
          remedies.push_back({{"id", id}, {"text", text}});
        cell["remedies"] = std::move(remedies);
      }
      if (c.peak_rss) cell["peak_rss_bytes"] = *c.peak_rss;
      if (c.peak_gpu) cell["peak_gpu_bytes"] = *c.peak_gpu;
      if (c.stacks) cell["stacks"] = stacks::to_json(*c.stacks);
      cells.push_back(std::move(cell));
    }
    nlohmann::json nb = {{"path", r.path.string()},
                         {"kernel", r.kernel_name},
                         {"outcome", outcome_name(r.outcome)},
                         {"seconds", r.seconds},
                         {"cells", std::move(cells)},
                         {"passed", r.count(CellStatus::passed)},
                         {"failed", r.count(CellStatus::failed)},
                         {"skipped", r.count(CellStatus::skipped) + r.count(CellStatus::not_run)}};
    if (!r.cause.empty()) nb["cause"] = r.cause;
    if (!r.headline.empty()) nb["headline"] = r.headline;
    if (r.peak_rss) nb["peak_rss_bytes"] = *r.peak_rss;
    if (r.peak_gpu) nb["peak_gpu_bytes"] = *r.peak_gpu;
    if (r.report) nb["report"] = r.report->string();
    if (r.report_html) nb["report_html"] = r.report_html->string();
    if (r.executed) nb["executed"] = r.executed->string();
    if (!r.warnings.empty()) nb["warnings"] = r.warnings;
    if (r.scheduling) {
      nlohmann::json scheduling = {{"wait_s", r.scheduling->wait_s},
                                   {"requeues", r.scheduling->requeues}};
      scheduling["estimate_bytes"] =
          r.scheduling->estimate ? nlohmann::json(*r.scheduling->estimate) : nlohmann::json();
      scheduling["gpu"] =
          r.scheduling->gpu.empty() ? nlohmann::json() : nlohmann::json(r.scheduling->gpu);
      nb["scheduling"] = std::move(scheduling);
    }
    notebooks.push_back(std::move(nb));
  }
  return {{"exit_status", exit_status(results)}, {"notebooks", std::move(notebooks)}};
}

std::string notebook_line(const NotebookResult& r, bool color) {
  const char* paint = "";
  if (color)
    paint = r.outcome == Outcome::passed   ? "\x1b[32m"
            : r.outcome == Outcome::failed ? "\x1b[33m"
                                           : "\x1b[31m";
  const std::string verdict = r.outcome == Outcome::passed   ? "PASS"
                              : r.outcome == Outcome::failed ? "FAIL"
                              : r.outcome == Outcome::died   ? "DIED"
                                                             : "ERROR";
  std::string line = fmt::format(
      "{}{:<5}{} {}  {} passed, {} failed, {} skipped  {:.1f} s  peak {}", paint, verdict,
      color ? "\x1b[0m" : "", report::terminal_safe(r.path.string()), r.count(CellStatus::passed),
      r.count(CellStatus::failed), r.count(CellStatus::skipped) + r.count(CellStatus::not_run),
      r.seconds, bytes_or_dash(r.peak_rss));
  if (r.peak_gpu) line += ", GPU " + bytes_or_dash(r.peak_gpu);
  return line + "\n";
}

std::string scheduling_table(const std::vector<NotebookResult>& results) {
  std::size_t width = 8;
  for (const auto& r : results)
    width = std::max(width, report::terminal_safe(r.path.string()).size());
  std::string out = fmt::format("\n{:<{}}  {:>10}  {:>10}  {:>10}  {:>7}  {:<8}  {}\n", "notebook",
                                width, "estimate", "peak", "GPU peak", "wait", "requeues", "GPU");
  for (const auto& r : results) {
    if (!r.scheduling) continue;
    out +=
        fmt::format("{:<{}}  {:>10}  {:>10}  {:>10}  {:>5.1f} s  {:<8}  {}\n",
                    report::terminal_safe(r.path.string()), width,
                    bytes_or_dash(r.scheduling->estimate), bytes_or_dash(r.peak_rss),
                    bytes_or_dash(r.peak_gpu), r.scheduling->wait_s, r.scheduling->requeues.size(),
                    r.scheduling->gpu.empty() ? "-" : report::terminal_safe(r.scheduling->gpu));
    for (const auto& why : r.scheduling->requeues)
      out += "  ran again: " + report::terminal_safe(why) + "\n";
  }
  return out;
}

std::string failure_details(const NotebookResult& r) {
  std::string out;
  for (const auto& c : r.cells) {
    if (c.status != CellStatus::failed) continue;
    out += fmt::format("  cell {} ({}): {}\n", c.number, report::terminal_safe(c.first_line),
                       report::terminal_safe(c.message));
    if (!c.headline.empty()) {
      out += "    why: " + report::terminal_safe(c.headline) + "\n";
      if (!c.remedies.empty())
        out += "    what to do: " + report::terminal_safe(c.remedies.front().second) + "\n";
    }
    // The report's summary follows under "crash report": not under the cell as well (a cell
    // that timed out, then hung, keeps "timeout" as its type, and the report, then where it
    // was stuck, as its details: only the stacks are its own).
    std::string_view own = c.details;
    if (r.outcome == Outcome::died && !r.summary.empty()) {
      if (c.failure_type == r.cause) continue;
      if (own.starts_with(r.summary)) own.remove_prefix(r.summary.size());
    }
    const std::string tb = first_lines(std::string(own), 20);
    std::istringstream lines(report::terminal_safe(tb));
    std::string line;
    while (std::getline(lines, line))
      out += "    " + line + "\n";
  }
  if (r.outcome == Outcome::died) {
    if (r.report) out += "  crash report: " + report::terminal_safe(r.report->string()) + "\n";
    if (r.report_html) out += "  page: " + report::terminal_safe(r.report_html->string()) + "\n";
    if (!r.summary.empty()) {
      std::istringstream lines(report::terminal_safe(r.summary));
      std::string line;
      while (std::getline(lines, line))
        out += "    " + line + "\n";
    } else if (!r.headline.empty()) {
      out += "  " + report::terminal_safe(r.headline) + "\n";
    }
  }
  return out;
}

std::string github_annotations(const std::vector<NotebookResult>& results) {
  std::vector<const NotebookResult*> failing;
  for (const auto& r : results)
    if (r.outcome != Outcome::passed) failing.push_back(&r);
  // Deaths first: GitHub shows at most 10 annotations of a kind per step.
  std::stable_sort(failing.begin(), failing.end(), [](const auto* a, const auto* b) {
    return (a->outcome == Outcome::died) > (b->outcome == Outcome::died);
  });
  std::string out;
  for (std::size_t i = 0; i < failing.size() && i < 10; ++i) {
    const NotebookResult& r = *failing[i];
    const CellResult* cell = r.first_failure();
    const std::string title =
        r.outcome == Outcome::died ? "kernel died: " + r.cause : "notebook failed: " + cause_of(r);
    std::string message = cell != nullptr ? "cell " + std::to_string(cell->number) + " (" +
                                                cell->first_line + "): " + cell->message
                                          : r.headline;
    if (r.report) message += "\ncrash report: " + r.report->string();
    out += "::error file=" + github_escape(r.path.string(), true) +
           ",title=" + github_escape(title, true) + "::" + github_escape(message, false) + "\n";
  }
  return out;
}

std::string github_step_summary(const std::vector<NotebookResult>& results) {
  auto cell_text = [](std::string text) {
    std::replace(text.begin(), text.end(), '\n', ' ');
    std::string out;
    for (char c : text)
      out += c == '|' ? std::string("\\|") : std::string(1, c);
    return out;
  };
  std::string out =
      "### kernel-watchdog smoke\n\n| notebook | result | cause | failing cell | peak memory | "
      "report |\n|---|---|---|---|---|---|\n";
  for (const auto& r : results) {
    const CellResult* cell = r.first_failure();
    std::string peak = bytes_or_dash(r.peak_rss);
    if (r.peak_gpu) peak += ", GPU " + bytes_or_dash(r.peak_gpu);
    out += "| " + cell_text(r.path.string()) + " | " + std::string(outcome_name(r.outcome)) +
           " | " + cell_text(cause_of(r)) + " | " +
           (cell != nullptr
                ? cell_text("cell " + std::to_string(cell->number) + ": " + cell->first_line)
                : std::string()) +
           " | " + peak + " | " + (r.report ? cell_text(r.report->string()) : std::string()) +
           " |\n";
  }
  return out;
}

}  // namespace kwd::smoke
