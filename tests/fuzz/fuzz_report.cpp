// A stored report read back by `reports list`, `show`, `show --json` and `html`: any bytes are
// either refused with a reason (too big, too deep, not a JSON object) or rendered by every
// view, in the order `reports show` takes. Nothing may throw past the readers' checks.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "dump.hpp"
#include "kwd/diagnosis/diagnose.hpp"
#include "kwd/diagnosis/report_view.hpp"
#include "kwd/report/html_page.hpp"
#include "kwd/report/report_document.hpp"
#include "kwd/report/report_file.hpp"
#include "kwd/report/report_listing.hpp"
#include "kwd/report/terminal_summary.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto file = kwd::report::parse_report(text, "fuzz.json");
  if (!file.document) {
    (void)file.problem();
    return 0;
  }
  const kwd::report::StoredReport stored{"fuzz", "/fuzz/fuzz.json", 0, size};
  (void)kwd::report::format_list_row(kwd::report::list_row(stored, file));
  (void)kwd::report::to_text(*file.document, 2);
  auto document = *file.document;
  if (!kwd::diagnosis::ReportView(document).object("/diagnosis"))
    kwd::diagnosis::complete_report(document);
  (void)kwd::report::render_summary(document, {.color = true, .width = 80});
  (void)kwd::report::render_summary(document, {.color = false, .width = 200});
  (void)kwd::report::render_html(document);
  return 0;
}
