#include <unistd.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "kwd/cli/commands.hpp"
#include "kwd/diagnosis/diagnose.hpp"
#include "kwd/report/html_page.hpp"
#include "kwd/report/report_document.hpp"
#include "kwd/report/report_store.hpp"
#include "kwd/report/terminal_summary.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/default_app.hpp"
#include "kwd/util/private_files.hpp"

namespace kwd::cli {
namespace {

std::optional<nlohmann::json> load(const std::filesystem::path& path, std::string& error) {
  std::ifstream in(path);
  if (!in) {
    error = "cannot open " + path.string();
    return std::nullopt;
  }
  auto doc = nlohmann::json::parse(in, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    error = path.string() + " is not a kernel-watchdog report (not a JSON object)";
    return std::nullopt;
  }
  return doc;
}

}  // namespace

Command add_reports_command(CLI::App& app) {
  auto report_dir = std::make_shared<std::string>();
  auto* reports = app.add_subcommand("reports", "List and read crash reports");
  reports->require_subcommand(1);
  reports->add_option("--report-dir", *report_dir,
                      "The report store to read (default as for `run`)");

  auto* list =
      reports->add_subcommand("list", "Crash reports, newest first: time, kernel, cause, path");
  auto query = std::make_shared<std::string>("latest");
  auto as_json = std::make_shared<bool>(false);
  auto* show =
      reports->add_subcommand("show", "Why a kernel died: the report as a one-screen summary");
  show->add_option("id", *query, "A report id (or a unique prefix of one), a path, or `latest`")
      ->capture_default_str();
  show->add_flag("--json", *as_json, "Print the raw JSON document instead");
  auto html_output = std::make_shared<std::string>("-");
  auto* html = reports->add_subcommand(
      "html", "The report as one self-contained HTML page: diagnosis, memory chart, every section");
  html->add_option("id", *query, "A report id (or a unique prefix of one), a path, or `latest`")
      ->capture_default_str();
  html->add_option("-o,--output", *html_output, "The file to write (`-`: standard output)")
      ->capture_default_str();
  auto* open = reports->add_subcommand(
      "open", "Write the report's HTML page to the user cache and open it (xdg-open / open)");
  open->add_option("id", *query, "A report id (or a unique prefix of one), a path, or `latest`")
      ->capture_default_str();

  return {reports, [=]() -> int {
            const report::ReportStore store(report::ReportStore::resolve_dir(*report_dir));
            if (list->parsed()) {
              const auto all = store.list();
              if (all.empty()) {
                std::cout << "No crash reports in " << store.dir().string() << "\n";
                return 0;
              }
              std::cout << "TIME                      KERNEL    CAUSE                              "
                           "       PATH\n";
              for (const auto& r : all) {
                std::string error;
                const auto doc = load(r.path, error);
                const std::string when =
                    doc ? doc->value("/kernel/died_at"_json_pointer, std::string("?"))
                        : util::iso8601_utc(r.mtime_ms);
                std::string kernel =
                    doc ? doc->value("/kernel/kernel_id"_json_pointer, std::string()) : "";
                if (kernel.empty() && doc)
                  kernel = "pid " + std::to_string(doc->value("/kernel/pid"_json_pointer, 0));
                std::string cause = doc ? report::cause_line(*doc) : "(unreadable: " + error + ")";
                if (cause.size() > 40) cause = cause.substr(0, 39) + "…";
                std::printf("%-25s %-9.9s %-41s %s\n", when.c_str(), kernel.c_str(), cause.c_str(),
                            r.path.c_str());
              }
              return 0;
            }
            const auto found = store.find(*query);
            if (!found) {
              std::cerr << "kernel-watchdog: no report matches '" << *query << "' in "
                        << store.dir().string() << " (see `kernel-watchdog reports list`)\n";
              return 1;
            }
            std::string error;
            const auto doc = load(found->path, error);
            if (!doc) {
              std::cerr << "kernel-watchdog: " << error << "\n";
              return 1;
            }
            if (*as_json) {
              std::cout << report::to_text(*doc, 2) << "\n";
              return 0;
            }
            // Reports written before the diagnosis existed get one now, from their own facts.
            auto document = *doc;
            if (!document.contains("diagnosis")) diagnosis::complete_report(document);
            if (html->parsed() || open->parsed()) {
              const std::string page = report::render_html(document);
              if (html->parsed() && *html_output == "-") {
                std::cout << page;
                return 0;
              }
              if (html->parsed()) {
                std::ofstream out(*html_output, std::ios::binary | std::ios::trunc);
                out << page;
                if (!out.flush()) {
                  std::cerr << "kernel-watchdog: cannot write " << *html_output << "\n";
                  return 1;
                }
                std::cerr << "Wrote " << *html_output << "\n";
                return 0;
              }
              std::filesystem::path written;
              try {
                const auto dir = util::user_cache_dir("html");
                util::ensure_private_dir(dir);
                written = util::write_file_atomically(dir, found->id + ".html", page, 0600);
              } catch (const std::exception& e) {
                std::cerr << "kernel-watchdog: " << e.what() << "\n";
                return 1;
              }
              if (const auto problem = util::open_with_default_app(written); !problem.empty()) {
                std::cerr << "kernel-watchdog: " << problem << "\n";
                return 1;
              }
              std::cout << "Opened " << written.string() << "\n";
              return 0;
            }
            report::SummaryStyle style;
            style.color = ::isatty(STDOUT_FILENO) && std::getenv("NO_COLOR") == nullptr;
            std::cout << report::render_summary(document, style);
            std::cout << "\nReport: " << found->path.string() << "\n";
            return 0;
          }};
}

}  // namespace kwd::cli
