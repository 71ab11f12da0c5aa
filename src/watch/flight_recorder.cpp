#include "kwd/watch/flight_recorder.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "kwd/platform/host.hpp"
#include "kwd/probes/process_record.hpp"
#include "kwd/protocol/kernel_argv.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/watch/flight_evidence.hpp"
#include "kwd/watch/live_status.hpp"

namespace kwd::watch {
namespace {

constexpr std::int64_t kMemoryRewriteIntervalMs = 1000;

}  // namespace

FlightRecorder::FlightRecorder(const std::filesystem::path& store_dir, pid_t kernel_pid,
                               std::string connection_file, std::vector<std::string> argv) {
  base_.token = util::random_name(8);
  base_.watchdog_pid = ::getpid();
  base_.watchdog_start_time = probes::start_time_of(base_.watchdog_pid).value_or(0);
  base_.kernel_pid = kernel_pid;
  base_.kernel_start_time = probes::start_time_of(kernel_pid).value_or(0);
  base_.boot_id = platform::boot_id();
  base_.host = this_host();
  base_.pid_namespace = own_pid_namespace();
  if (!connection_file.empty())
    base_.kernel_id = protocol::kernel_id_from_connection_file(connection_file);
  base_.connection_file = std::move(connection_file);
  base_.argv = std::move(argv);
  if (base_.kernel_start_time == 0) {
    // Without its start a later process with the pid could be taken for the kernel.
    spdlog::debug("no flight record: the kernel's start time cannot be read");
    return;
  }
  try {
    auto dir = util::SafeDir::open_private(store_dir);
    const std::string lock_name = flight_record_name(base_) + std::string(kFlightLockSuffix);
    // Close-on-exec: a child that inherited it would hold the lock after the watchdog died.
    lock_.reset(::openat(dir.fd(), lock_name.c_str(),
                         O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    // Waited for, not tried: between the create and this, a scanner may hold it for the
    // moment it takes to find no record beside it.
    if (!lock_ || ::flock(lock_.get(), LOCK_EX) != 0) {
      spdlog::debug("no flight record: its lock: {}", std::strerror(errno));
      if (lock_) ::unlinkat(dir.fd(), lock_name.c_str(), 0);
      lock_.reset();
      return;
    }
    dir_.emplace(std::move(dir));
  } catch (const std::exception& e) {
    spdlog::debug("no flight record: {}", e.what());
  }
}

FlightRecord FlightRecorder::now(const Watch& watch) const {
  FlightRecord r = base_;
  r.kernel_started_at_ms = watch.kernel_started_at_ms();
  r.notebook = watch.notebook().path;
  r.state = execution_state(watch);
  r.end_requested = end_requested_ || watch.shutdown_requested();
  if (const auto* listener = watch.listener()) {
    if (const auto* cell = listener->activity().cells().in_flight()) {
      r.cell_execution_count = cell->execution_count;
      r.cell_code = cell->code.substr(0, FlightRecord::kMaxCodeBytes);
      r.cell_started_at_ms = cell->started_at_ms;
    }
  }
  if (const auto* s = watch.timeline().latest()) {
    r.sampled_at_ms = s->t_ms;
    r.rss = s->rss;
    r.cgroup_usage = s->cgroup_usage;
    r.cgroup_limit = s->cgroup_limit;
    r.mem_total = s->mem_total;
    r.gpu_used = s->gpu_used;
  }
  return r;
}

void FlightRecorder::observe(const Watch& watch) noexcept {
  if (!dir_) return;
  try {
    FlightRecord record = now(watch);
    if (!written_ || flight_cell_changed(*written_, record)) {
      highest_step_ = memory_step(record);
      write(std::move(record));
      return;
    }
    if (!flight_memory_changed(*written_, record)) return;
    // Climbing near the limit is written at once, each step (at most ten); anything else at
    // most once a second.
    const int step = memory_step(record);
    const bool climbing = step >= 90 && step > highest_step_;
    if (!climbing && util::steady_ms() - written_steady_ms_ < kMemoryRewriteIntervalMs) return;
    highest_step_ = std::max(highest_step_, step);
    write(std::move(record));
  } catch (const std::exception& e) {
    spdlog::debug("flight record not made: {}", e.what());
  }
}

void FlightRecorder::end_requested(const Watch& watch) noexcept {
  if (end_requested_) return;
  end_requested_ = true;
  observe(watch);
}

void FlightRecorder::write(FlightRecord record) noexcept {
  try {
    // Read at each write, not per sample: a counter that rises after the last write is what
    // the next watchdog looks for.
    const auto cgroup = mark_memory_cgroup(record.kernel_pid);
    record.memory_cgroup_dir = cgroup.dir;
    record.memory_cgroup_inode = cgroup.inode;
    record.memory_cgroup_version = cgroup.version;
    record.cgroup_oom_kills = cgroup.oom_kills;
    record.written_at_ms = util::wall_ms();
    dir_->write_file(flight_record_name(record), to_text(record), 0600, util::Replace::kAllowed,
                     util::Durability::kAtomicOnly);
    written_ = std::move(record);
    written_steady_ms_ = util::steady_ms();
    failed_ = false;
  } catch (const std::exception& e) {
    // The store's trouble is said once already, where it matters (the report); this is the
    // same trouble again: said in the log only.
    if (!failed_)
      spdlog::debug(
          "flight record not written ({}): a death that takes this watchdog with the "
          "kernel would go unreported",
          e.what());
    failed_ = true;
  }
}

void FlightRecorder::remove() noexcept {
  if (!dir_) return;
  // The record first: a record found without its lock is one being removed.
  const std::string name = flight_record_name(base_);
  ::unlinkat(dir_->fd(), name.c_str(), 0);
  ::unlinkat(dir_->fd(), (name + std::string(kFlightLockSuffix)).c_str(), 0);
  lock_.reset();
  dir_.reset();
  written_.reset();
}

}  // namespace kwd::watch
