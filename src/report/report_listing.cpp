#include "kwd/report/report_listing.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "kwd/diagnosis/report_view.hpp"
#include "kwd/report/report_document.hpp"
#include "kwd/report/terminal_text.hpp"
#include "kwd/util/clock.hpp"

namespace kwd::report {
namespace {

// The first `columns` characters of `text` (whole UTF-8 sequences), padded with spaces to
// `columns`; "…" marks a cut when `ellipsis`.
std::string fit(const std::string& text, std::size_t columns, bool ellipsis) {
  std::string out;
  std::size_t used = 0;
  std::size_t i = 0;
  while (i < text.size() && used < columns) {
    std::size_t n = 1;
    while (i + n < text.size() && (static_cast<unsigned char>(text[i + n]) & 0xC0) == 0x80)
      ++n;
    const bool last_column = used + 1 == columns;
    const bool more = i + n < text.size();
    if (ellipsis && last_column && more) {
      out += "…";
      i = text.size();
    } else {
      out.append(text, i, n);
      i += n;
    }
    ++used;
  }
  return out + std::string(columns - used, ' ');
}

}  // namespace

ListedReport list_row(const StoredReport& stored, const nlohmann::json& document) {
  const diagnosis::ReportView v(document);
  ListedReport row;
  row.stored = stored;
  row.readable = true;
  if (const auto died = v.integer("/kernel/died_at_ms")) {
    row.at_ms = *died;
    row.when = util::iso8601_utc(*died);
  } else if (const auto detected = v.integer("/hang/detected_at_ms")) {
    row.at_ms = *detected;
    row.when = util::iso8601_utc(*detected);
  } else {
    row.at_ms = stored.mtime_ms;
    row.when = v.text("/kernel/died_at").value_or(util::iso8601_utc(stored.mtime_ms));
  }
  if (auto id = v.text("/kernel/kernel_id"); id && !id->empty())
    row.kernel = *id;
  else if (auto pid = v.scalar("/kernel/pid"))
    row.kernel = "pid " + *pid;
  else
    row.kernel = "?";
  row.cause = cause_line(document);
  return row;
}

ListedReport list_row(const StoredReport& stored, const ReportFile& file) {
  if (file.document) return list_row(stored, *file.document);
  ListedReport row;
  row.stored = stored;
  row.at_ms = stored.mtime_ms;
  row.when = util::iso8601_utc(stored.mtime_ms);
  row.kernel = "?";
  row.cause = "unreadable: " + file.reason;
  return row;
}

std::vector<ListedReport> list_reports(const ReportStore& store) {
  std::vector<ListedReport> rows;
  for (const auto& stored : store.list())
    rows.push_back(list_row(stored, read_report_file(stored.path)));
  std::stable_sort(rows.begin(), rows.end(), [](const ListedReport& a, const ListedReport& b) {
    return a.at_ms > b.at_ms;  // ties keep the store's order (by id, newest first)
  });
  return rows;
}

std::string list_header() {
  return fit("TIME", 25, false) + " " + fit("KERNEL", 9, false) + " " + fit("CAUSE", 41, false) +
         " PATH\n";
}

std::string format_list_row(const ListedReport& row) {
  // The cause of an unreadable file is the whole reason: it is not cut.
  const std::string cause = terminal_safe(row.cause);
  return fit(terminal_safe(row.when), 25, false) + " " + fit(terminal_safe(row.kernel), 9, false) +
         " " + (row.readable ? fit(cause, 41, true) : cause) + " " +
         terminal_safe(row.stored.path.string()) + "\n";
}

}  // namespace kwd::report
