#include "kwd/report/report_store.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "kwd/platform/file_time.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/private_files.hpp"
#include "kwd/util/size_parse.hpp"

namespace kwd::report {
namespace fs = std::filesystem;

namespace {
std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}
}  // namespace

fs::path ReportStore::resolve_dir(const std::string& explicit_dir) {
  if (!explicit_dir.empty()) return explicit_dir;
  if (auto d = env_or_empty("KERNEL_WATCHDOG_REPORT_DIR"); !d.empty()) return d;
  if (auto state = env_or_empty("XDG_STATE_HOME"); !state.empty() && fs::path(state).is_absolute())
    return fs::path(state) / "kernel-watchdog" / "reports";
  std::string home = env_or_empty("HOME");
  if (home.empty()) return fallback_dir();
  return fs::path(home) / ".local" / "state" / "kernel-watchdog" / "reports";
}

fs::path ReportStore::fallback_dir() {
  return util::shared_temp_dir() / ("kernel-watchdog-" + std::to_string(::geteuid())) / "reports";
}

void ReportStore::prepare() const {
  util::SafeDir::open_private(dir_).sweep_temporaries();
}

fs::path ReportStore::write(const std::string& id, const std::string& json_text) const {
  // Synced before it is linked into place: linking first saved 0.7 ms a death, but left the
  // crash test's torn writes almost no window to be hit.
  auto path = util::SafeDir::open_private(dir_).write_file(id + ".json", json_text, 0600,
                                                           util::Replace::kNever);
  try {
    enforce_cap(limits_);
  } catch (const std::exception&) {
    // The report is written; an old one left behind is no reason to say otherwise.
  }
  return path;
}

std::optional<StoreLimits> StoreLimits::parse(const std::string& text) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const auto comma = text.find(',', start);
    parts.push_back(text.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  // COUNT, COUNT,SIZE or COUNT,SIZE,DAYS: what is left out keeps its default.
  if (parts.empty() || parts.size() > 3) return std::nullopt;
  StoreLimits limits;
  const auto count = util::parse_size(parts[0]);
  if (!count) return std::nullopt;
  limits.max_reports = static_cast<std::size_t>(*count);
  if (parts.size() > 1) {
    const auto bytes = util::parse_size(parts[1]);
    if (!bytes) return std::nullopt;
    limits.max_bytes = *bytes;
  }
  if (parts.size() > 2) {
    const auto days = util::parse_size(parts[2]);
    if (!days || *days > 100'000) return std::nullopt;
    limits.max_age_days = static_cast<int>(*days);
  }
  return limits;
}

StoreLimits StoreLimits::from_environment(std::string* problem) {
  const char* text = std::getenv("KERNEL_WATCHDOG_REPORT_CAP");
  if (text == nullptr || *text == '\0') return {};
  if (auto limits = parse(text)) return *limits;
  if (problem != nullptr)
    *problem =
        std::string("KERNEL_WATCHDOG_REPORT_CAP=") + text +
        " is not COUNT[,SIZE[,DAYS]] (e.g. 200, 200,100M or 1000,512M,90); the defaults apply";
  return {};
}

std::vector<StoredReport> ReportStore::list() const {
  std::vector<StoredReport> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(".") || !name.ends_with(".json")) continue;
    struct stat st {};
    if (::stat(entry.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    out.push_back({name.substr(0, name.size() - 5), entry.path(), platform::modified_ms(st),
                   static_cast<std::uint64_t>(st.st_size)});
  }
  // Ids start with a UTC timestamp, so the name orders them; mtime breaks nothing.
  std::sort(out.begin(), out.end(), [](const StoredReport& a, const StoredReport& b) {
    return a.id != b.id ? a.id > b.id : a.mtime_ms > b.mtime_ms;
  });
  return out;
}

std::optional<StoredReport> ReportStore::find(const std::string& query) const {
  if (query.empty()) return std::nullopt;
  const auto all = list();
  if (query == "latest") {
    if (all.empty()) return std::nullopt;
    return all.front();
  }
  if (query.find('/') != std::string::npos) {
    std::error_code ec;
    if (fs::is_regular_file(query, ec))
      return StoredReport{fs::path(query).stem().string(), fs::path(query), 0};
    return std::nullopt;
  }
  std::string id = query;
  if (id.ends_with(".json")) id.resize(id.size() - 5);
  std::optional<StoredReport> match;
  for (const auto& r : all) {
    if (r.id == id) return r;
    if (r.id.starts_with(id)) {
      if (match) return std::nullopt;  // ambiguous prefix
      match = r;
    }
  }
  return match;
}

int ReportStore::enforce_cap(const StoreLimits& limits) const {
  int removed = 0;
  const auto all = list();  // newest first
  const std::int64_t oldest_allowed =
      util::wall_ms() - std::int64_t{limits.max_age_days} * 86'400'000;
  std::uint64_t kept_bytes = 0;
  std::error_code ec;
  for (std::size_t i = 0; i < all.size(); ++i) {
    kept_bytes += all[i].size_bytes;
    if (i == 0) continue;  // the newest stays, whatever the limits
    const bool too_many = limits.max_reports > 0 && i >= limits.max_reports;
    const bool too_big = limits.max_bytes > 0 && kept_bytes > limits.max_bytes;
    const bool too_old = limits.max_age_days > 0 && all[i].mtime_ms < oldest_allowed;
    if (too_many || too_big || too_old) {
      if (fs::remove(all[i].path, ec)) ++removed;
      kept_bytes -= all[i].size_bytes;
    }
  }
  return removed;
}

}  // namespace kwd::report
