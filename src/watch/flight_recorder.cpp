#include "kwd/watch/flight_recorder.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include "kwd/platform/host.hpp"
#include "kwd/probes/process_record.hpp"
#include "kwd/protocol/kernel_argv.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/watch/flight_evidence.hpp"
#include "kwd/watch/live_status.hpp"

namespace kwd::watch {
namespace {

std::uint64_t start_time_of(pid_t pid) {
  const auto record = probes::ProcessRecord::open(pid);
  const auto lineage = record ? record->lineage() : std::nullopt;
  return lineage ? lineage->start_time : 0;
}

}  // namespace

FlightRecorder::FlightRecorder(const std::filesystem::path& store_dir, pid_t kernel_pid,
                               std::string connection_file, std::vector<std::string> argv) {
  base_.watchdog_pid = ::getpid();
  base_.watchdog_start_time = start_time_of(base_.watchdog_pid);
  base_.kernel_pid = kernel_pid;
  base_.kernel_start_time = start_time_of(kernel_pid);
  base_.boot_id = platform::boot_id();
  if (!connection_file.empty())
    base_.kernel_id = protocol::kernel_id_from_connection_file(connection_file);
  base_.connection_file = std::move(connection_file);
  base_.argv = std::move(argv);
  if (base_.watchdog_start_time == 0 || base_.kernel_start_time == 0) {
    // Without the starts a later pid could be taken for these processes: no record at all.
    spdlog::debug("no flight record: the processes' start times cannot be read");
    return;
  }
  try {
    dir_ = util::SafeDir::open_private(store_dir);
  } catch (const std::exception& e) {
    spdlog::debug("no flight record: {}", e.what());
  }
}

FlightRecord FlightRecorder::now(const Watch& watch) const {
  FlightRecord r = base_;
  r.kernel_started_at_ms = watch.kernel_started_at_ms();
  r.notebook = watch.notebook().path;
  r.state = execution_state(watch);
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
    if (written_ && !flight_changed(*written_, record)) return;
    write(std::move(record));
  } catch (const std::exception& e) {
    spdlog::debug("flight record not made: {}", e.what());
  }
}

void FlightRecorder::write(FlightRecord record) noexcept {
  try {
    // Read at each write, not per sample: a counter that rises after the last write is what
    // the next watchdog looks for.
    const auto cgroup = mark_memory_cgroup(record.kernel_pid);
    record.memory_cgroup_dir = cgroup.dir;
    record.memory_cgroup_version = cgroup.version;
    record.cgroup_oom_kills = cgroup.oom_kills;
    record.written_at_ms = util::wall_ms();
    dir_->write_file(flight_record_name(record), to_text(record), 0600, util::Replace::kAllowed,
                     util::Durability::kAtomicOnly);
    written_ = std::move(record);
    failed_ = false;
  } catch (const std::exception& e) {
    if (!failed_)
      spdlog::warn(
          "flight record not written ({}): a death that takes this watchdog with the "
          "kernel would go unreported",
          e.what());
    failed_ = true;
  }
}

void FlightRecorder::remove() noexcept {
  if (!dir_) return;
  ::unlinkat(dir_->fd(), flight_record_name(base_).c_str(), 0);
  written_.reset();
}

}  // namespace kwd::watch
