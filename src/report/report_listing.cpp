#include "kwd/report/report_listing.hpp"

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "kwd/diagnosis/report_view.hpp"
#include "kwd/report/fallback_reports.hpp"
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
    row.when = util::local_wall_time(*died);
  } else if (const auto detected = v.integer("/hang/detected_at_ms")) {
    row.at_ms = *detected;
    row.when = util::local_wall_time(*detected);
  } else {
    row.at_ms = stored.mtime_ms;
    row.when = util::local_wall_time(stored.mtime_ms);  // as every other row: the reader's zone
  }
  row.kernel_id = v.text("/kernel/kernel_id").value_or("");
  row.notebook = v.text("/kernel/notebook").value_or("");
  if (!row.kernel_id.empty())
    row.kernel = row.kernel_id;
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
  row.when = util::local_wall_time(stored.mtime_ms);
  row.kernel = "?";
  row.cause = "unreadable: " + file.reason;
  return row;
}

std::vector<ListedReport> list_reports(const ReportStore& store) {
  std::vector<ListedReport> rows;
  for (const auto& stored : store.list())
    rows.push_back(list_row(stored, read_report_file(stored.path)));
  for (const auto& stored : fallback_reports_for(store)) {
    // A move cut short, or under way: the store's copy is the one.
    if (std::any_of(rows.begin(), rows.end(),
                    [&](const ListedReport& row) { return row.stored.id == stored.id; }))
      continue;
    rows.push_back(list_row(stored, read_report_file(stored.path)));
    rows.back().in_fallback = true;
  }
  std::stable_sort(rows.begin(), rows.end(), [](const ListedReport& a, const ListedReport& b) {
    return a.at_ms > b.at_ms;  // ties keep the store's order (by id, newest first)
  });
  return rows;
}

namespace {

std::string file_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The name a person knows the kernel by: its notebook's file name, else its kernel id.
std::string known_as(const ListedReport& row) {
  if (!row.notebook.empty()) return file_name(row.notebook);
  return row.kernel;
}

}  // namespace

ReportLookup find_report(const ReportStore& store, const std::string& query) {
  ReportLookup out;
  if (query.empty()) return out;
  if (query.find('/') != std::string::npos && !query.ends_with(".ipynb")) {
    out.found = store.find(query);  // a path
    return out;
  }
  const auto rows = list_reports(store);
  if (query == "latest") {
    if (!rows.empty()) out.found = rows.front().stored;
    return out;
  }
  if (all_digits(query) && query.size() <= 3) {
    const auto n = static_cast<std::size_t>(std::stoul(query));
    if (n >= 1 && n <= rows.size()) out.found = rows[n - 1].stored;
    return out;
  }
  // Each way of naming, tried in turn; the first that fits anything decides.
  std::string id = query;
  if (id.ends_with(".json")) id.resize(id.size() - 5);
  const auto stem = [](const std::string& name) {
    return name.ends_with(".ipynb") ? name.substr(0, name.size() - 6) : name;
  };
  const std::vector<std::function<bool(const ListedReport&)>> ways = {
      [&](const ListedReport& r) { return r.stored.id == id; },
      [&](const ListedReport& r) { return r.stored.id.starts_with(id); },
      [&](const ListedReport& r) { return r.kernel_id == query; },
      [&](const ListedReport& r) { return query.size() >= 4 && r.kernel_id.starts_with(query); },
      [&](const ListedReport& r) { return !r.notebook.empty() && r.notebook == query; },
      [&](const ListedReport& r) {
        return !r.notebook.empty() &&
               (file_name(r.notebook) == query || stem(file_name(r.notebook)) == query);
      },
  };
  for (std::size_t w = 0; w < ways.size(); ++w) {
    std::vector<ListedReport> fit_rows;
    for (const auto& r : rows)
      if (ways[w](r)) fit_rows.push_back(r);
    if (fit_rows.empty()) continue;
    // A kernel or a notebook (ways 2..5) that died more than once: its newest death, as
    // long as they all are the same kernel or notebook.
    const bool one_kernel_or_notebook =
        w >= 2 && std::all_of(fit_rows.begin(), fit_rows.end(), [&](const ListedReport& r) {
          return w <= 3 ? r.kernel_id == fit_rows.front().kernel_id
                        : r.notebook == fit_rows.front().notebook;
        });
    if (fit_rows.size() == 1 || one_kernel_or_notebook)
      out.found = fit_rows.front().stored;
    else
      out.candidates = std::move(fit_rows);
    return out;
  }
  return out;
}

std::string list_header() {
  return fit("TIME", 25, false) + " " + fit("NOTEBOOK / KERNEL", 22, false) + " " +
         fit("CAUSE", 41, false) + " PATH\n";
}

std::string format_list_row(const ListedReport& row) {
  // The cause of an unreadable file is the whole reason: it is not cut.
  const std::string cause = terminal_safe(row.cause);
  return fit(terminal_safe(row.when), 25, false) + " " +
         fit(terminal_safe(known_as(row)), 22, true) + " " +
         (row.readable ? fit(cause, 41, true) : cause) + " " +
         terminal_safe(row.stored.path.string()) + "\n";
}

}  // namespace kwd::report
