#include "kwd/protocol/cell_timeline.hpp"

#include <algorithm>

namespace kwd::protocol {

CellTimeline::CellTimeline(std::size_t keep_last, std::size_t max_code_bytes)
    : keep_last_(keep_last), max_code_bytes_(max_code_bytes) {}

void CellTimeline::request_started(std::string request_id, std::int64_t now_ms) {
  if (in_flight_ && in_flight_->request_id == request_id) return;
  // A cell still waiting for its end sample ended before this one began: the newest reading
  // is its end, and a later one would charge it with this cell's memory.
  settle_awaiting();
  // Another cell still in flight: its idle was never seen.
  if (in_flight_) finish(now_ms, "unknown");
  Cell cell;
  cell.request_id = std::move(request_id);
  cell.started_at_ms = now_ms;
  cell.rss_start = latest_rss_;
  cell.rss_peak = latest_rss_;
  in_flight_ = std::move(cell);
}

void CellTimeline::start(std::string request_id, std::int64_t execution_count,
                         std::string_view code, std::int64_t now_ms) {
  if (!in_flight_ || in_flight_->request_id != request_id || in_flight_->input_seen)
    request_started(std::move(request_id), now_ms);  // its busy was missed
  Cell& cell = *in_flight_;
  cell.input_seen = true;
  cell.execution_count = execution_count;
  cell.code_truncated = code.size() > max_code_bytes_;
  cell.code.assign(code.substr(0, max_code_bytes_));
  last_count_ = std::max(last_count_, execution_count);
  ++started_;
}

void CellTimeline::end(const std::string& request_id, std::int64_t now_ms) {
  if (in_flight_ && in_flight_->request_id == request_id) finish(now_ms, "ok");
}

void CellTimeline::finish(std::int64_t now_ms, const char* status_if_running) {
  Cell cell = std::move(*in_flight_);
  in_flight_.reset();
  if (!cell.input_seen) return;  // a silent execution, not a cell anyone sees
  cell.ended_at_ms = now_ms;
  if (cell.status == "running") cell.status = status_if_running;
  cell.rss_end = latest_rss_;  // provisional: the next sample replaces it
  cell.awaiting_end_sample = true;
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
  if (sample.rss < 0) return;
  latest_rss_ = sample.rss;
  if (in_flight_) in_flight_->rss_peak = std::max(in_flight_->rss_peak, sample.rss);
  settle_awaiting();
}

void CellTimeline::settle_awaiting() {
  if (latest_rss_ < 0) return;
  for (auto it = finished_.rbegin(); it != finished_.rend() && it->awaiting_end_sample; ++it) {
    it->rss_end = latest_rss_;
    it->rss_peak = std::max(it->rss_peak, latest_rss_);
    it->awaiting_end_sample = false;
  }
}

}  // namespace kwd::protocol
