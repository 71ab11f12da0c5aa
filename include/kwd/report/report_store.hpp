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
};

// Where reports live: a private directory of finished JSON documents, one per death.
class ReportStore {
 public:
  explicit ReportStore(std::filesystem::path dir) : dir_(std::move(dir)) {}

  // --report-dir, else $KERNEL_WATCHDOG_REPORT_DIR, else $XDG_STATE_HOME/kernel-watchdog/reports,
  // else ~/.local/state/kernel-watchdog/reports.
  static std::filesystem::path resolve_dir(const std::string& explicit_dir = {});
  // Used when the configured directory cannot be written:
  // ${TMPDIR:-/tmp}/kernel-watchdog-UID/reports.
  static std::filesystem::path fallback_dir();

  [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }
  // Creates the directory (0700) and removes temporaries of dead writers. Throws util::FileError.
  void prepare() const;
  // Atomically writes <id>.json (0600). Throws util::FileError.
  std::filesystem::path write(const std::string& id, const std::string& json_text) const;
  // Newest first; temporaries are never listed.
  [[nodiscard]] std::vector<StoredReport> list() const;
  // An id, a unique id prefix, a path, or "latest".
  [[nodiscard]] std::optional<StoredReport> find(const std::string& query) const;
  // Keeps at most `max_reports` and none older than `max_age_days`; returns how many removed.
  int enforce_cap(std::size_t max_reports, int max_age_days) const;

 private:
  std::filesystem::path dir_;
};

}  // namespace kwd::report
