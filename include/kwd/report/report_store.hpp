#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace kwd::report {

struct StoredReport {
  std::string id;  // file name without ".json"
  std::filesystem::path path;
  std::int64_t mtime_ms = 0;
  std::uint64_t size_bytes = 0;
};

// How much a store keeps, enforced oldest first after every report written: by count, by
// total size and by age. $KERNEL_WATCHDOG_REPORT_CAP="COUNT[,SIZE[,DAYS]]" (e.g. "200",
// "200,100M" or "1000,512M,90"; 0 turns one off; what is left out keeps its default) changes
// the defaults.
struct StoreLimits {
  std::size_t max_reports = 1000;
  std::uint64_t max_bytes = 512ull * 1024 * 1024;
  int max_age_days = 90;

  // The defaults, or the environment's; `problem` says why a malformed value was ignored.
  static StoreLimits from_environment(std::string* problem = nullptr);
  static std::optional<StoreLimits> parse(const std::string& text);
};

// Where reports live: a private directory of finished JSON documents, one per death.
class ReportStore {
 public:
  explicit ReportStore(std::filesystem::path dir, StoreLimits limits = {})
      : dir_(std::move(dir)), limits_(limits) {}

  // --report-dir, else $KERNEL_WATCHDOG_REPORT_DIR, else $XDG_STATE_HOME/kernel-watchdog/reports,
  // else ~/.local/state/kernel-watchdog/reports.
  static std::filesystem::path resolve_dir(const std::string& explicit_dir = {});
  // Used when the configured directory cannot be written:
  // ${TMPDIR:-/tmp}/kernel-watchdog-UID/reports.
  static std::filesystem::path fallback_dir();

  [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }
  // Creates the directory (0700) and removes temporaries of dead writers. Throws util::FileError.
  void prepare() const;
  // Atomically writes <id>.json (0600), then holds the store to its limits (the report just
  // written is always kept). Throws util::FileError for the write only.
  std::filesystem::path write(const std::string& id, const std::string& json_text) const;
  // Newest first; temporaries are never listed.
  [[nodiscard]] std::vector<StoredReport> list() const;
  // An id, a unique id prefix, a path, or "latest".
  [[nodiscard]] std::optional<StoredReport> find(const std::string& query) const;
  // Removes the oldest reports beyond the limits (0: no limit of that kind), never the
  // newest; returns how many it removed.
  int enforce_cap(const StoreLimits& limits) const;
  int enforce_cap(std::size_t max_reports, int max_age_days) const {
    return enforce_cap(StoreLimits{max_reports, 0, max_age_days});
  }

 private:
  std::filesystem::path dir_;
  StoreLimits limits_;
};

}  // namespace kwd::report
