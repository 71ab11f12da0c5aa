#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "kwd/daemon/daemon.hpp"
#include "kwd/daemon/unwatched_end.hpp"
#include "kwd/logging/log_fields.hpp"
#include "kwd/platform/host.hpp"
#include "kwd/probes/process_record.hpp"
#include "kwd/report/fallback_reports.hpp"
#include "kwd/report/report_document.hpp"
#include "kwd/util/clock.hpp"

// What the daemon watches, kept on disk, and the kernels that ended while no daemon ran.

namespace kwd::daemon {
namespace {

bool still_running(const WatchedEntry& k) {
  const auto record = probes::ProcessRecord::open(k.pid);
  const auto lineage = record ? record->lineage() : std::nullopt;
  return lineage && lineage->start_time == k.start_time;
}

struct Stored {
  std::optional<std::filesystem::path> path;
  bool in_fallback = false;
};

// The record stored as a report is, or in the fallback location when the store refuses it.
Stored store_record(const report::ReportStore& store, const std::string& id, nlohmann::json doc) {
  try {
    return {store.write(id, report::to_text(doc)), false};
  } catch (const std::exception& e) {
    doc["notes"].push_back(std::string("report directory unusable: ") + e.what());
    doc[report::kStoredInsteadOf] = report::store_key(store.dir());
  }
  try {
    return {report::ReportStore(report::ReportStore::fallback_dir(),
                                report::StoreLimits::from_environment())
                .write(id, report::to_text(doc)),
            true};
  } catch (const std::exception& e) {
    spdlog::error("no record of it could be written: {}", e.what());
    return {};
  }
}

}  // namespace

void Daemon::record_watched() {
  if (!watched_record_ || watched_record_due_) return;
  watched_record_due_ = true;
  // Kernels found together (a server restoring its sessions) are one write.
  loop_.after(std::chrono::milliseconds(0), [this] {
    watched_record_due_ = false;
    write_watched_record();
  });
}

void Daemon::write_watched_record() {
  WatchedRecord record;
  record.written_ms = util::wall_ms();
  record.daemon_pid = ::getpid();
  record.boot_id = platform::boot_id();
  for (const auto& [pid, k] : kernels_)
    record.kernels.push_back({pid, k.process.start_time, k.process.started_at_ms,
                              k.watched_since_ms, k.kernel_id, k.process.connection_file,
                              k.notebook, k.kernel_name, report_dir_for(k), k.container.has_value(),
                              k.process.argv});
  try {
    watched_record_->write(record);
  } catch (const std::exception& e) {
    static bool said = false;
    if (!std::exchange(said, true))
      spdlog::warn(
          "cannot keep the record of the kernels watched ({}): a kernel that ends while "
          "this daemon is down will not be accounted for",
          e.what());
  }
}

void Daemon::report_unwatched_ends() {
  const auto record = watched_record_->read();
  // What is still running is found again by the scans, which write the record anew.
  watched_record_->remove();
  if (!record) return;
  // Another boot: its processes ended with the machine, and its pids mean nothing now.
  if (const auto boot = platform::boot_id();
      !record->boot_id.empty() && !boot.empty() && boot != record->boot_id) {
    if (!record->kernels.empty())
      spdlog::info(
          "the machine restarted since the last daemon's record: the {} kernels it "
          "watched ended with it; no record of them",
          record->kernels.size());
    return;
  }
  const std::int64_t now = util::wall_ms();
  const std::int64_t last_alive = std::max(record->written_ms, record->touched_ms);
  for (const auto& k : record->kernels) {
    if (still_running(k)) continue;
    const report::ReportStore store(report::ReportStore::resolve_dir(k.report_dir),
                                    report::StoreLimits::from_environment());
    // A death the daemon reported just before it went: no second word of it.
    if (report::holds_death_report(store, k.kernel_id, k.pid)) continue;
    UnwatchedEnd end{k, last_alive, now, std::nullopt};
    if (!k.in_container && !k.connection_file.empty()) {
      struct stat st {};
      const bool present = ::lstat(k.connection_file.c_str(), &st) == 0;
      if (present || errno == ENOENT) end.connection_file_present = present;
    }
    const std::string id = report::make_report_id(now, k.kernel_id, k.pid);
    const logging::LogFields fields({{"kernel_id", k.kernel_id}});
    const auto stored = store_record(store, id, unwatched_end_report(end, id));
    spdlog::warn(
        "kernel {} (pid {}) ended while unwatched: no daemon ran between {} and now; how "
        "it ended is not known; record: {}",
        k.kernel_id, k.pid, util::iso8601_utc(last_alive),
        stored.path ? stored.path->string() : std::string("none"));
    count_written(k.report_dir, stored.path.has_value(), stored.in_fallback);
  }
}

}  // namespace kwd::daemon
