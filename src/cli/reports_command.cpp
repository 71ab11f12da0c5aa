#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "kwd/cli/commands.hpp"
#include "kwd/diagnosis/causes.hpp"
#include "kwd/diagnosis/diagnose.hpp"
#include "kwd/diagnosis/report_view.hpp"
#include "kwd/platform/default_app.hpp"
#include "kwd/report/html_page.hpp"
#include "kwd/report/report_document.hpp"
#include "kwd/report/report_file.hpp"
#include "kwd/report/report_listing.hpp"
#include "kwd/report/report_store.hpp"
#include "kwd/report/terminal_summary.hpp"
#include "kwd/report/terminal_text.hpp"
#include "kwd/util/private_files.hpp"

namespace kwd::cli {
namespace {

constexpr const char* kQueryHelp =
    "Which report: `latest` (the default), N for the Nth newest (1 = latest), a report id or "
    "a prefix of one, a kernel id, a notebook (path, file name, or name without .ipynb), "
    "or the path of a report file";

// The stored facts judged again: the writer's diagnosis and the traceback it found are set
// aside, and what today's rules make of the rest is printed next to what was stored.
int print_rediagnosis(const nlohmann::json& stored, bool as_json) {
  const std::string before = diagnosis::ReportView(stored).text("/diagnosis/headline").value_or("");
  const nlohmann::json facts = diagnosis::rediagnose(stored);
  const auto& now = facts["diagnosis"];
  if (as_json) {
    std::cout << report::to_text(now, 2) << "\n";
    return 0;
  }
  const diagnosis::ReportView view(facts);
  const std::string cause = view.text("/diagnosis/cause").value_or("unknown");
  const auto* info = diagnosis::find_cause(cause);
  std::cout << report::terminal_safe(view.text("/diagnosis/headline").value_or("")) << "\n"
            << "cause: " << (info ? std::string(info->name) + " (" + cause + ")" : cause)
            << ", confidence " << view.text("/diagnosis/confidence").value_or("?") << "\n";
  if (!before.empty() && before != view.text("/diagnosis/headline").value_or(""))
    std::cout << "stored diagnosis was: " << report::terminal_safe(before) << "\n";
  std::cout << "\nevidence:\n";
  for (const auto& e : view.array("/diagnosis/evidence"))
    if (e.is_object() && e.value("fact", nlohmann::json()).is_string())
      std::cout << "  - " << report::terminal_safe(e["fact"].get<std::string>()) << "\n";
  std::cout << "\nwhat to do:\n";
  for (const auto& r : view.array("/diagnosis/remedies"))
    if (r.is_object() && r.value("text", nlohmann::json()).is_string())
      std::cout << "  - " << report::terminal_safe(r["text"].get<std::string>()) << "\n";
  return 0;
}

// `reports list --json`: the rows, for programs (the JupyterLab extension's server side).
std::string list_json_text(const report::ReportStore& store,
                           const std::vector<report::ListedReport>& rows) {
  nlohmann::json out = {{"store", store.dir().string()}, {"reports", nlohmann::json::array()}};
  for (const auto& row : rows)
    out["reports"].push_back({{"id", row.stored.id},
                              {"path", row.stored.path.string()},
                              {"at_ms", row.at_ms},
                              {"kernel_id", row.kernel_id},
                              {"notebook", row.notebook},
                              {"cause", row.cause},
                              {"readable", row.readable},
                              {"in_fallback", row.in_fallback}});
  return report::to_text(out, -1);
}

}  // namespace

Command add_reports_command(CLI::App& app) {
  auto report_dir = std::make_shared<std::string>();
  auto* reports = app.add_subcommand("reports", "List and read crash reports");
  reports->require_subcommand(1);
  reports->add_option("--report-dir", *report_dir,
                      "The report store to read (default as for `run`)");

  // Where the reports are is the first thing a reader needs: the store this environment
  // names, worked out when the help is printed, and where the other writers put theirs.
  reports->footer([] {
    return "Examples:\n"
           "  kernel-watchdog reports list\n"
           "  kernel-watchdog reports show latest\n"
           "  kernel-watchdog reports list --report-dir smoke-results/reports\n"
           "\n"
           "Where reports are: --report-dir DIR (before or after list, show...), else\n"
           "$KERNEL_WATCHDOG_REPORT_DIR, else $XDG_STATE_HOME/kernel-watchdog/reports, else\n"
           "~/.local/state/kernel-watchdog/reports. In this environment that is\n"
           "  " +
           report::ReportStore::resolve_dir("").string() +
           "\n"
           "`run` (and so kernelspec wraps and the provisioner) and the daemon write there.\n"
           "Elsewhere, read with --report-dir: `smoke` writes to OUTPUT_DIR/reports (default\n"
           "smoke-results/reports); the pytest plugin to --kernel-watchdog-report-dir/TEST_FILE\n"
           "(default: $KERNEL_WATCHDOG_REPORT_DIR, else pytest's temporary directory; each\n"
           "failure names its report's path, which `reports show PATH` reads).\n"
           "The store keeps at most 1000 reports, 512 MiB and 90 days (the oldest go first when\n"
           "a new one is written); KERNEL_WATCHDOG_REPORT_CAP=COUNT[,SIZE[,DAYS]], e.g. 200 or\n"
           "200,100M,30, sets other caps for every writer that sees it.";
  });
  auto* list =
      reports->add_subcommand("list", "Crash reports, newest first: time, kernel, cause, path");
  auto list_json = std::make_shared<bool>(false);
  list->add_flag("--json", *list_json,
                 "One JSON array: id, path, at_ms, kernel_id, notebook, cause, readable");
  list->footer("Example: kernel-watchdog reports list | head -5");
  auto query = std::make_shared<std::string>("latest");
  auto as_json = std::make_shared<bool>(false);
  auto* show =
      reports->add_subcommand("show", "Why a kernel died: the report as a one-screen summary");
  show->add_option("id", *query, kQueryHelp)->capture_default_str();
  show->add_flag("--json", *as_json, "Print the raw JSON document instead");
  show->footer(
      "Examples:\n"
      "  kernel-watchdog reports show                 # the newest report\n"
      "  kernel-watchdog reports show 2               # the one before it\n"
      "  kernel-watchdog reports show train.ipynb     # the newest of that notebook\n"
      "  kernel-watchdog reports show --json 2026112  # a report id prefix, as JSON");
  auto html_output = std::make_shared<std::string>("-");
  auto* html = reports->add_subcommand(
      "html", "The report as one self-contained HTML page: diagnosis, memory chart, every section");
  html->add_option("id", *query, kQueryHelp)->capture_default_str();
  html->add_option("-o,--output", *html_output, "The file to write (`-`: standard output)")
      ->capture_default_str();
  html->footer("Example: kernel-watchdog reports html latest -o crash.html");
  auto* open = reports->add_subcommand(
      "open", "Write the report's HTML page to the user cache and open it (xdg-open / open)");
  open->add_option("id", *query, kQueryHelp)->capture_default_str();
  open->footer("Example: kernel-watchdog reports open train.ipynb");

  auto diagnose_json = std::make_shared<bool>(false);
  auto* diagnose = reports->add_subcommand(
      "diagnose",
      "Run today's rules over a stored report's facts and print the diagnosis they give now\n"
      "(reports written by older versions, and recorded fixtures, get the better rules).");
  diagnose->footer("Example: kernel-watchdog reports diagnose latest --json");
  diagnose->add_option("id", *query, kQueryHelp)->capture_default_str();
  diagnose->add_flag("--json", *diagnose_json, "Print the new diagnosis as JSON");
  // `reports list --report-dir DIR` as well as `reports --report-dir DIR list`: after the
  // subcommand it wins.
  auto sub_report_dir = std::make_shared<std::string>();
  for (auto* sub : {list, show, html, open, diagnose})
    sub->add_option("--report-dir", *sub_report_dir,
                    "The report store to read (as `reports --report-dir`)");

  return {reports, [=]() -> int {
            const report::ReportStore store(report::ReportStore::resolve_dir(
                sub_report_dir->empty() ? *report_dir : *sub_report_dir));
            if (list->parsed()) {
              const auto rows = report::list_reports(store);
              if (*list_json) {
                std::cout << list_json_text(store, rows) << "\n";
                return 0;
              }
              if (rows.empty()) {
                std::cout << "No crash reports in " << report::terminal_safe(store.dir().string())
                          << "\n";
                return 0;
              }
              std::cout << report::list_header();
              for (const auto& row : rows)
                std::cout << report::format_list_row(row);
              const auto waiting = std::count_if(rows.begin(), rows.end(),
                                                 [](const auto& row) { return row.in_fallback; });
              if (waiting > 0)
                std::cout << "\n"
                          << waiting << (waiting == 1 ? " report waits" : " reports wait")
                          << " in the fallback location "
                          << report::terminal_safe(report::ReportStore::fallback_dir().string())
                          << ": the store could not take " << (waiting == 1 ? "it" : "them")
                          << "; the next report written to it moves "
                          << (waiting == 1 ? "it" : "them")
                          << " in (a running daemon tries every 10 s).\n";
              return 0;
            }
            const auto lookup = report::find_report(store, *query);
            if (!lookup.candidates.empty()) {
              std::cerr << "kernel-watchdog: '" << report::terminal_safe(*query) << "' fits "
                        << lookup.candidates.size()
                        << " reports; name one by its id (or a longer prefix):\n"
                        << report::list_header();
              for (const auto& row : lookup.candidates)
                std::cerr << report::format_list_row(row);
              return 1;
            }
            const auto& found = lookup.found;
            if (!found) {
              std::cerr << "kernel-watchdog: no report matches '" << report::terminal_safe(*query)
                        << "' in " << report::terminal_safe(store.dir().string())
                        << " (see `kernel-watchdog reports list`)\n";
              return 1;
            }
            const auto file = report::read_report_file(found->path);
            if (!file.document) {
              std::cerr << "kernel-watchdog: " << report::terminal_safe(file.problem()) << "\n";
              return 1;
            }
            const auto& doc = file.document;
            if (diagnose->parsed()) return print_rediagnosis(*doc, *diagnose_json);
            if (*as_json) {
              std::cout << report::to_text(*doc, 2) << "\n";
              return 0;
            }
            // Reports written before the diagnosis existed get one now, from their own facts.
            auto document = *doc;
            if (!diagnosis::ReportView(document).object("/diagnosis"))
              diagnosis::complete_report(document);
            if (html->parsed() || open->parsed()) {
              const std::string page = report::render_html(document);
              if (html->parsed() && *html_output == "-") {
                std::cout << page;
                return 0;
              }
              if (html->parsed()) {
                errno = 0;
                std::ofstream out(*html_output, std::ios::binary | std::ios::trunc);
                out << page;
                if (!out.flush()) {
                  // The system's reason (the stream keeps only that it failed).
                  const int why = errno;
                  std::cerr << "kernel-watchdog: cannot write "
                            << report::terminal_safe(*html_output)
                            << (why != 0 ? std::string(": ") + std::strerror(why) : "") << "\n";
                  return 1;
                }
                std::cerr << "Wrote " << report::terminal_safe(*html_output) << "\n";
                return 0;
              }
              std::filesystem::path written;
              try {
                written = util::SafeDir::open_private(platform::user_cache_dir("html"))
                              .write_file(found->id + ".html", page, 0600);
              } catch (const std::exception& e) {
                std::cerr << "kernel-watchdog: " << e.what() << "\n";
                return 1;
              }
              if (const auto problem = platform::open_with_default_app(written); !problem.empty()) {
                std::cerr << "kernel-watchdog: " << problem << "\n";
                return 1;
              }
              std::cout << "Opened " << report::terminal_safe(written.string()) << "\n";
              return 0;
            }
            // A terminal: its width, colour unless NO_COLOR. Piped: plain, nothing cut.
            report::SummaryStyle style;
            const bool terminal = ::isatty(STDOUT_FILENO) != 0;
            style.color = terminal && std::getenv("NO_COLOR") == nullptr;
            style.clip_long_lines = terminal;
            if (struct winsize size{};
                terminal && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0)
              style.width = size.ws_col;
            std::cout << report::render_summary(document, style);
            std::cout << "\nReport: " << report::terminal_safe(found->path.string()) << "\n";
            return 0;
          }};
}

}  // namespace kwd::cli
