#include "kwd/report/fallback_reports.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

#include "kwd/platform/regular_file.hpp"
#include "kwd/report/report_document.hpp"
#include "kwd/report/report_file.hpp"
#include "kwd/util/private_files.hpp"

namespace kwd::report {
namespace fs = std::filesystem;

namespace {

bool same_dir(const fs::path& a, const fs::path& b) {
  return store_key(a) == store_key(b);
}

// The fallback directory, opened only when every directory on its way is ours or root's: it
// lies in /tmp, where anyone may have made a directory of that name first.
std::optional<util::SafeDir> open_fallback(const ReportStore& store, const fs::path& fallback_dir) {
  if (same_dir(fallback_dir, store.dir())) return std::nullopt;
  std::error_code ec;
  if (!fs::is_directory(fallback_dir, ec)) return std::nullopt;
  try {
    return util::SafeDir::open(fallback_dir);
  } catch (const util::FileError&) {
    return std::nullopt;
  }
}

struct Tagged {
  std::string text;
  std::string meant_for;  // its stored_instead_of
};

// A fallback report of ours that names the store it was meant for: its text and that store.
std::optional<Tagged> read_tagged(const util::SafeDir& fallback, const std::string& name) {
  auto file = platform::open_regular_file(fallback.fd(), name.c_str(), O_NOFOLLOW);
  if (!file.fd || file.st.st_uid != ::geteuid() ||
      static_cast<std::uintmax_t>(file.st.st_size) > kMaxReportBytes)
    return std::nullopt;
  auto text = platform::read_up_to(file.fd.get(), kMaxReportBytes + 1);
  if (!text) return std::nullopt;
  const auto parsed = parse_report(*text, name);
  if (!parsed.document) return std::nullopt;
  const auto meant = parsed.document->find(kStoredInsteadOf);
  if (meant == parsed.document->end() || !meant->is_string()) return std::nullopt;
  return Tagged{std::move(*text), meant->get<std::string>()};
}

// The report's text, when it is ours and was meant for `store`.
std::optional<std::string> text_meant_for(const util::SafeDir& fallback, const std::string& name,
                                          const ReportStore& store) {
  auto tagged = read_tagged(fallback, name);
  if (!tagged || tagged->meant_for != store_key(store.dir())) return std::nullopt;
  return std::move(tagged->text);
}

}  // namespace

std::string store_key(const fs::path& dir) {
  std::error_code ec;
  fs::path key = fs::absolute(dir, ec);
  if (ec) key = dir;
  key = key.lexically_normal();
  if (!key.has_filename() && key.has_parent_path() && key != key.root_path())
    key = key.parent_path();
  return key.string();
}

std::vector<std::string> stores_waited_for(const fs::path& fallback_dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(fallback_dir, ec)) return out;
  try {
    const auto fallback = util::SafeDir::open(fallback_dir);
    for (const auto& stored : ReportStore(fallback.path()).list()) {
      const auto tagged = read_tagged(fallback, stored.id + ".json");
      if (tagged && std::find(out.begin(), out.end(), tagged->meant_for) == out.end())
        out.push_back(tagged->meant_for);
    }
  } catch (const util::FileError&) {
  }
  return out;
}

std::vector<StoredReport> fallback_reports_for(const ReportStore& store,
                                               const fs::path& fallback_dir) {
  std::vector<StoredReport> out;
  const auto fallback = open_fallback(store, fallback_dir);
  if (!fallback) return out;
  for (auto& stored : ReportStore(fallback->path()).list())
    if (text_meant_for(*fallback, stored.id + ".json", store)) out.push_back(std::move(stored));
  return out;
}

Adoption adopt_fallback_reports(const ReportStore& store, const fs::path& fallback_dir) {
  Adoption out;
  const auto fallback = open_fallback(store, fallback_dir);
  if (!fallback) return out;
  // Oldest first: a store that fills again part way has the older deaths.
  auto waiting = ReportStore(fallback->path()).list();
  for (auto it = waiting.rbegin(); it != waiting.rend(); ++it) {
    const std::string name = it->id + ".json";
    const auto text = text_meant_for(*fallback, name, store);
    if (!text) continue;
    if (!out.problem.empty()) {
      ++out.waiting;
      continue;
    }
    try {
      store.write(it->id, *text);
    } catch (const util::FileError& e) {
      // Already there: a move cut short after its write (ids carry a random part, so the
      // same name is the same report). Anything else: the store still refuses.
      std::error_code ec;
      if (!fs::is_regular_file(store.dir() / name, ec)) {
        out.problem = e.what();
        ++out.waiting;
        continue;
      }
    }
    ::unlinkat(fallback->fd(), name.c_str(), 0);
    ++out.moved;
  }
  return out;
}

bool holds_death_report(const ReportStore& store, const std::string& kernel_id, int kernel_pid,
                        std::int64_t since_ms) {
  // Report ids are "<time>-<kernel id, cut>-<pid>-<random>": the middle names the process.
  const std::string sample = make_report_id(0, kernel_id, kernel_pid);
  const std::size_t after_time = sample.find('-') + 1;
  const std::string middle = sample.substr(after_time, sample.rfind('-') + 1 - after_time);
  const auto names_it = [&](const StoredReport& r) {
    const auto dash = r.id.find('-');
    if (dash == std::string::npos || r.id.compare(dash + 1, middle.size(), middle) != 0)
      return false;
    if (r.mtime_ms < since_ms) return false;
    // A hang report names the process too; only a death counts.
    const auto file = read_report_file(r.path);
    return !file.document || file.document->value("kind", std::string()) != "hang";
  };
  const auto reports = store.list();
  if (std::any_of(reports.begin(), reports.end(), names_it)) return true;
  const auto waiting = fallback_reports_for(store);
  return std::any_of(waiting.begin(), waiting.end(), names_it);
}

WriteOutcome write_or_fall_back(const ReportStore& store, const std::string& id,
                                nlohmann::json& doc, const StoreLimits& fallback_limits) {
  WriteOutcome out;
  try {
    out.path = store.write(id, to_text(doc));
    return out;
  } catch (const std::exception& e) {
    out.refused = e.what();
  }
  try {
    doc["notes"].push_back("report directory unusable: " + out.refused);
    doc[kStoredInsteadOf] = store_key(store.dir());
    out.path = ReportStore(ReportStore::fallback_dir(), fallback_limits).write(id, to_text(doc));
    out.in_fallback = true;
  } catch (const std::exception& e) {
    out.fallback_refused = e.what();
  }
  return out;
}

}  // namespace kwd::report
