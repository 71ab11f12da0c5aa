#include "kwd/protocol/cell_timeline.hpp"

#include <algorithm>

namespace kwd::protocol {

CellTimeline::CellTimeline(std::size_t keep_last, std::size_t max_code_bytes)
    : keep_last_(keep_last), max_code_bytes_(max_code_bytes) {}

std::optional<CellTimeline::Reading> CellTimeline::reading_at(std::int64_t t_ms) const {
  // The last reading at or before t; if the history does not reach back that far, its oldest.
  for (auto it = readings_.rbegin(); it != readings_.rend(); ++it)
    if (it->t_ms <= t_ms) return *it;
  if (readings_.empty()) return std::nullopt;
  return readings_.front();
}

std::optional<CellTimeline::Reading> CellTimeline::first_reading_from(std::int64_t t_ms) const {
  const auto it = std::find_if(readings_.begin(), readings_.end(),
                               [t_ms](const Reading& r) { return r.t_ms >= t_ms; });
  if (it == readings_.end()) return std::nullopt;
  return *it;
}

std::optional<CellTimeline::Reading> CellTimeline::gpu_reading_at(std::int64_t t_ms) const {
  for (auto it = readings_.rbegin(); it != readings_.rend(); ++it)
    if (it->gpu >= 0 && it->gpu_t_ms <= t_ms) return *it;
  return std::nullopt;
}

std::optional<CellTimeline::Reading> CellTimeline::first_gpu_reading_from(std::int64_t t_ms) const {
  const auto it = std::find_if(readings_.begin(), readings_.end(), [t_ms](const Reading& r) {
    return r.gpu >= 0 && r.gpu_t_ms >= t_ms;
  });
  if (it == readings_.end()) return std::nullopt;
  return *it;
}

CellTimeline::Reading CellTimeline::peak_between(std::int64_t from_ms, std::int64_t to_ms) const {
  Reading peak{from_ms, timeline::kUnknown, timeline::kUnknown, from_ms};
  for (const Reading& r : readings_) {
    // kUnknown is below every known value.
    if (r.t_ms >= from_ms && r.t_ms <= to_ms) peak.rss = std::max(peak.rss, r.rss);
    if (r.gpu_t_ms >= from_ms && r.gpu_t_ms <= to_ms) peak.gpu = std::max(peak.gpu, r.gpu);
  }
  return peak;
}

void CellTimeline::set_gpu_start(Cell& cell, std::int64_t t_ms) const {
  const auto before = gpu_reading_at(t_ms);
  // No GPU sample between the previous cell's end and this start: both are the one reading
  // taken after that end (the previous cell's end, maybe still to come).
  if (last_end_.at_ms >= 0 && (!before || before->gpu_t_ms < last_end_.at_ms)) {
    cell.gpu.start = last_end_.gpu;
    cell.gpu_start_awaiting = last_end_.awaiting;
    cell.gpu_start_from_ms = last_end_.at_ms;
    return;
  }
  cell.gpu.start = before ? before->gpu : timeline::kUnknown;
}

void CellTimeline::request_started(std::string request_id, std::int64_t t_ms) {
  if (in_flight_ && in_flight_->request_id == request_id) return;
  // A cell the kernel announced is running: this busy is its own (its execute_input will say
  // so by its count) or a late one of an execution before it. Either way it is no new cell.
  if (in_flight_ && in_flight_->announced_by_kernel && in_flight_->request_id.empty()) return;
  begin(std::move(request_id), t_ms);
}

void CellTimeline::begin(std::string request_id, std::int64_t t_ms) {
  settle_before(t_ms);
  // Another cell still in flight: its idle was never seen.
  if (in_flight_) finish(t_ms, "unknown");
  Cell cell;
  cell.request_id = std::move(request_id);
  cell.started_at_ms = t_ms;
  if (const auto before = reading_at(t_ms)) cell.rss.start = before->rss;
  set_gpu_start(cell, t_ms);
  // Samples taken after it started but before we heard of it count towards its peak.
  const Reading since = peak_between(t_ms, INT64_MAX);
  cell.rss.peak = std::max(cell.rss.start, since.rss);
  cell.gpu.peak = std::max(cell.gpu.start, since.gpu);
  in_flight_ = std::move(cell);
}

void CellTimeline::announced_by_kernel(std::int64_t execution_count, std::string_view code,
                                       bool truncated, std::int64_t t_ms) {
  // IOPub said it first, whole: the cell in flight, or one that has ended since. The pipe is
  // read in passing (before a sample, a hang report, at the death), so a record can come
  // after its cell's idle. Matched by count and code, not count alone: cells run outside the
  // history (nbval's) all have the same count.
  const std::string_view kept = code.substr(0, max_code_bytes_);
  const auto told_already = [&](Cell& c) {
    if (!c.input_seen || c.announced_by_kernel || c.late_record_matched ||
        c.execution_count != execution_count || c.code != kept)
      return false;
    c.late_record_matched = true;
    return true;
  };
  if (in_flight_ && told_already(*in_flight_)) return;
  for (auto it = finished_.rbegin(); it != finished_.rend(); ++it)
    if (told_already(*it)) return;
  if (!in_flight_ || in_flight_->input_seen) begin(std::string(), t_ms);
  Cell& cell = *in_flight_;
  cell.announced_by_kernel = true;
  cell.input_seen = true;
  cell.execution_count = execution_count;
  cell.code_truncated = truncated || code.size() > max_code_bytes_;
  cell.code.assign(code.substr(0, max_code_bytes_));
  last_count_ = std::max(last_count_, execution_count);
  ++started_;
}

void CellTimeline::start(std::string request_id, std::int64_t execution_count,
                         std::string_view code, std::int64_t t_ms) {
  if (in_flight_ && in_flight_->announced_by_kernel &&
      in_flight_->execution_count == execution_count &&
      (in_flight_->request_id.empty() || in_flight_->request_id == request_id)) {
    // The cell the kernel announced: IOPub's copy of its code is whole.
    in_flight_->request_id = std::move(request_id);
    in_flight_->code_truncated = code.size() > max_code_bytes_;
    in_flight_->code.assign(code.substr(0, max_code_bytes_));
    return;
  }
  // A late execute_input of an execution before the announced cell: not this cell's. When
  // the kernel announced two cells before IOPub spoke of the first (a quick cell in a "run
  // all"), the first was closed without its request id: this input gives it, so its idle and
  // outputs, also late, still find it.
  if (in_flight_ && in_flight_->announced_by_kernel && in_flight_->request_id.empty()) {
    adopt_request_id(std::move(request_id), execution_count, code);
    return;
  }
  if (!in_flight_ || in_flight_->request_id != request_id || in_flight_->input_seen)
    request_started(std::move(request_id), t_ms);  // its busy was missed
  Cell& cell = *in_flight_;
  cell.input_seen = true;
  cell.execution_count = execution_count;
  cell.code_truncated = code.size() > max_code_bytes_;
  cell.code.assign(code.substr(0, max_code_bytes_));
  last_count_ = std::max(last_count_, execution_count);
  ++started_;
}

void CellTimeline::adopt_request_id(std::string request_id, std::int64_t execution_count,
                                    std::string_view code) {
  for (auto it = finished_.rbegin(); it != finished_.rend(); ++it) {
    if (it->execution_count != execution_count) continue;
    if (!it->announced_by_kernel || !it->request_id.empty()) return;
    it->request_id = std::move(request_id);
    it->code_truncated = code.size() > max_code_bytes_;
    it->code.assign(code.substr(0, max_code_bytes_));
    return;
  }
}

void CellTimeline::end(const std::string& request_id, std::int64_t t_ms) {
  if (in_flight_ && in_flight_->request_id == request_id) {
    finish(t_ms, "ok");
    return;
  }
  // A cell closed when the kernel announced the next one (in a "run all", the shim's record
  // of cell N+1 can come before IOPub's idle of cell N): its idle says it ran to its end.
  for (auto it = finished_.rbegin(); it != finished_.rend(); ++it)
    if (!request_id.empty() && it->request_id == request_id) {
      if (it->status == "unknown") it->status = "ok";
      break;
    }
}

void CellTimeline::finish(std::int64_t t_ms, const char* status_if_running) {
  Cell cell = std::move(*in_flight_);
  in_flight_.reset();
  if (!cell.input_seen) return;  // a silent execution, not a cell anyone sees
  cell.ended_at_ms = std::max(t_ms, cell.started_at_ms);
  if (cell.status == "running") cell.status = status_if_running;
  const Reading during = peak_between(cell.started_at_ms, cell.ended_at_ms);
  cell.rss.peak = cell.rss.peak_running = std::max(cell.rss.peak, during.rss);
  cell.gpu.peak = cell.gpu.peak_running = std::max(cell.gpu.peak, during.gpu);
  if (const auto after = first_reading_from(cell.ended_at_ms)) {
    set_end_reading(cell, *after);
  } else {
    // Provisional: the next sample replaces it.
    cell.rss.end = latest_rss();
    cell.awaiting_end_sample = true;
  }
  if (const auto after = first_gpu_reading_from(cell.ended_at_ms)) {
    set_gpu_end(cell, after->gpu);
  } else {
    cell.gpu.end = latest_gpu();
    cell.awaiting_gpu_end = true;
  }
  last_end_ = {cell.ended_at_ms, cell.gpu.end, cell.awaiting_gpu_end};
  if (keep_last_ == 0) return;
  finished_.push_back(std::move(cell));
  while (finished_.size() > keep_last_)
    finished_.pop_front();
}

void CellTimeline::on_output(const std::string& request_id, const Message& message) {
  Cell* cell = nullptr;
  if (in_flight_ && in_flight_->request_id == request_id) {
    cell = &*in_flight_;
  } else {
    // Late outputs of a cell that just ended (a background thread printing).
    for (auto it = finished_.rbegin(); it != finished_.rend() && cell == nullptr; ++it)
      if (it->request_id == request_id) cell = &*it;
  }
  if (cell == nullptr) return;
  cell->outputs.add(message);
  if (message.msg_type == "error") cell->status = "error";
}

void CellTimeline::on_memory_sample(const timeline::MemorySample& sample) {
  if (sample.rss < 0 && sample.gpu_used < 0) return;
  const std::int64_t gpu_t =
      sample.gpu_sampled_at_ms >= 0 ? std::min(sample.gpu_sampled_at_ms, sample.t_ms) : sample.t_ms;
  const Reading reading{sample.t_ms, sample.rss, sample.gpu_used, gpu_t};
  readings_.push_back(reading);
  while (readings_.size() > kReadings)
    readings_.pop_front();
  if (in_flight_ && sample.t_ms >= in_flight_->started_at_ms)
    in_flight_->rss.peak = std::max(in_flight_->rss.peak, sample.rss);
  if (in_flight_ && gpu_t >= in_flight_->started_at_ms)
    in_flight_->gpu.peak = std::max(in_flight_->gpu.peak, sample.gpu_used);
  for (auto it = finished_.rbegin(); it != finished_.rend() && it->awaiting_end_sample; ++it)
    if (sample.t_ms >= it->ended_at_ms) set_end_reading(*it, reading);
  if (reading.gpu >= 0) settle_gpu(reading);
}

void CellTimeline::settle_gpu(const Reading& reading) {
  const std::int64_t t = reading.gpu_t_ms;
  if (last_end_.awaiting && t >= last_end_.at_ms) last_end_ = {last_end_.at_ms, reading.gpu, false};
  // A reading taken after a boundary is that boundary's only if no cell ended in between:
  // else it holds that cell's work too, and neither side's part can be told (kUnknown).
  const auto settle = [&](Cell& cell, const Cell* next) {
    if (cell.gpu_start_awaiting && t >= cell.gpu_start_from_ms) {
      cell.gpu.start =
          cell.ended_at_ms >= 0 && cell.ended_at_ms <= t ? timeline::kUnknown : reading.gpu;
      cell.gpu.peak = std::max(cell.gpu.peak, cell.gpu.start);
      cell.gpu.peak_running = std::max(cell.gpu.peak_running, cell.gpu.start);
      cell.gpu_start_awaiting = false;
    }
    if (cell.awaiting_gpu_end && t >= cell.ended_at_ms) {
      if (next != nullptr && next->ended_at_ms >= 0 && next->ended_at_ms <= t) {
        cell.gpu.end = timeline::kUnknown;
        cell.gpu.peak = cell.gpu.peak_running;
        cell.awaiting_gpu_end = false;
      } else {
        set_gpu_end(cell, reading.gpu);
      }
    }
  };
  for (std::size_t i = 0; i < finished_.size(); ++i)
    settle(finished_[i], i + 1 < finished_.size() ? &finished_[i + 1] : nullptr);
  if (in_flight_) settle(*in_flight_, nullptr);
}

void CellTimeline::set_end_reading(Cell& cell, const Reading& reading) {
  cell.rss.end = reading.rss;
  cell.end_reading_at_ms = reading.t_ms;
  cell.rss.peak = std::max(cell.rss.peak_running, reading.rss);
  cell.awaiting_end_sample = false;
}

void CellTimeline::set_gpu_end(Cell& cell, std::int64_t gpu) {
  cell.gpu.end = gpu;
  cell.gpu.peak = std::max(cell.gpu.peak_running, gpu);
  cell.awaiting_gpu_end = false;
}

void CellTimeline::settle_before(std::int64_t next_start_ms) {
  // The kernel's busy for the next cell can reach us after samples that already carry that
  // cell's work (IOPub waits for the GIL), so an end reading taken after the next start is
  // replaced too: nothing was sampled between this end and that start, and the last reading
  // before the start is the best there is.
  for (auto it = finished_.rbegin(); it != finished_.rend(); ++it) {
    if (!it->awaiting_end_sample && it->end_reading_at_ms <= next_start_ms) break;
    if (const auto before = reading_at(next_start_ms))
      set_end_reading(*it, *before);
    else
      it->awaiting_end_sample = false;
  }
}

}  // namespace kwd::protocol
