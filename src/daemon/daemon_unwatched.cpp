#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "kwd/daemon/daemon.hpp"
#include "kwd/daemon/off_loop_read.hpp"
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

// How long the start waits for each connection file's look before it says "not known".
constexpr std::chrono::milliseconds kStartLookWait{50};

bool still_running(const WatchedEntry& k) {
  const auto started = probes::start_time_of(k.pid);
  return started && *started == k.start_time;
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
    if (!k.in_container && !k.connection_file.empty())  // off the loop: a home may stall
      end.connection_file_present = FileLook(k.connection_file).present(kStartLookWait);
    const std::string id = report::make_report_id(now, k.kernel_id, k.pid);
    const logging::LogFields fields({{"kernel_id", k.kernel_id}});
    auto doc = unwatched_end_report(end, id);
    const auto stored =
        report::write_or_fall_back(store, id, doc, report::StoreLimits::from_environment());
    if (!stored.path)
      spdlog::error("no record of it could be written: {}", stored.fallback_refused);
    spdlog::warn(
        "kernel {} (pid {}) ended while unwatched: no daemon ran between {} and now; how "
        "it ended is not known; record: {}",
        k.kernel_id, k.pid, util::iso8601_utc(last_alive),
        stored.path ? stored.path->string() : std::string("none"));
    count_written(k.report_dir, stored.path.has_value(), stored.in_fallback);
  }
}

}  // namespace kwd::daemon
