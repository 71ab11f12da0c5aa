#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "kwd/protocol/output_summary.hpp"
#include "kwd/timeline/memory_sample.hpp"

namespace kwd::protocol {

// One quantity over one cell. kUnknown where no sample could tell (GPU memory without a
// GPU, or before the first sample).
struct CellMemory {
  std::int64_t start = timeline::kUnknown;
  std::int64_t end = timeline::kUnknown;
  std::int64_t peak = timeline::kUnknown;
  std::int64_t peak_running = timeline::kUnknown;  // the peak while it ran, without the end
};

// One execution of a cell, from the kernel going busy for its execute_request (or, if that
// was missed, its execute_input) to the kernel's next idle for it. Times are the kernel's
// own (its messages' header dates): ipykernel sends IOPub from a thread that needs the GIL,
// so a cell that holds the GIL delivers its "busy" only after it has done its work.
struct Cell {
  std::string request_id;  // msg_id of the execute_request (parent of everything it caused)
  // Whether its execute_input was seen. A kernel that dies within milliseconds of starting
  // a cell may never get it out.
  bool input_seen = false;
  std::int64_t execution_count = -1;
  std::string code;  // at most CellTimeline's code cap
  bool code_truncated = false;
  std::int64_t started_at_ms = 0;
  std::int64_t ended_at_ms = -1;  // -1 while in flight
  // The kernel tree's RSS and the GPU memory its processes hold, each as the last sample
  // taken before the cell started, the first sample taken after it ended, the maximum in
  // between.
  CellMemory rss;
  CellMemory gpu;
  // When the RSS end reading was taken: a reading taken after the next cell already started
  // belongs to that one, so the end is taken again from before that start.
  std::int64_t end_reading_at_ms = -1;
  bool awaiting_end_sample = false;
  // GPU samples come at the GPU's own, slower rate: a cell's end is the first GPU sample
  // taken after it, even when that comes while the next cell runs, and a cell that starts
  // before the previous one's end was sampled starts from that same reading (nothing counted
  // twice, nothing lost).
  bool awaiting_gpu_end = false;
  bool gpu_start_awaiting = false;
  std::int64_t gpu_start_from_ms = -1;  // the previous cell's end, whose reading it awaits
  std::string status = "running";       // running, ok, error, unknown (its end was not seen)
  // The kernel itself said it starts (the shim's pre_run_cell record) before IOPub did, or
  // instead of it: request_id is empty until IOPub names the request.
  bool announced_by_kernel = false;
  // IOPub told of it first and the kernel's own record of it came later (matched by count
  // and code): that record is no new cell.
  bool late_record_matched = false;
  OutputSummary outputs;
};

// The cell in flight and the last N finished cells, with their memory, read from a short
// history of RSS samples. Fixed memory.
class CellTimeline {
 public:
  CellTimeline(std::size_t keep_last, std::size_t max_code_bytes);

  // The kernel went busy for an execute_request at `t_ms`: a cell may be starting (or a
  // silent execution, which never publishes its input and is forgotten when it ends).
  void request_started(std::string request_id, std::int64_t t_ms);
  // Its execute_input: the code and the execution count.
  void start(std::string request_id, std::int64_t execution_count, std::string_view code,
             std::int64_t t_ms);
  // The kernel said cell `execution_count` starts, with this code, before running it.
  // IOPub's busy and execute_input for it, when they come, are the same cell.
  void announced_by_kernel(std::int64_t execution_count, std::string_view code, bool truncated,
                           std::int64_t t_ms);
  // The kernel went idle after `request_id` at `t_ms`; a no-op unless that is the cell in
  // flight.
  void end(const std::string& request_id, std::int64_t t_ms);
  // An output (stream, error, display...) of the request it answers.
  void on_output(const std::string& request_id, const Message& message);
  void on_memory_sample(const timeline::MemorySample& sample);

  [[nodiscard]] const Cell* in_flight() const { return in_flight_ ? &*in_flight_ : nullptr; }
  // Oldest first.
  [[nodiscard]] const std::deque<Cell>& finished() const { return finished_; }
  [[nodiscard]] std::int64_t latest_rss() const {
    return readings_.empty() ? timeline::kUnknown : readings_.back().rss;
  }
  [[nodiscard]] std::int64_t latest_gpu() const {
    return readings_.empty() ? timeline::kUnknown : readings_.back().gpu;
  }
  // A cell's GPU start and end as a report says them. A reading still awaited is the newest
  // while no later cell has ended; after that none can tell this cell's part (kUnknown).
  [[nodiscard]] std::int64_t gpu_start_of(const Cell& cell) const {
    if (!cell.gpu_start_awaiting) return cell.gpu.start;
    return cell.ended_at_ms < 0 ? latest_gpu() : timeline::kUnknown;
  }
  [[nodiscard]] std::int64_t gpu_end_of(const Cell& cell) const {
    if (!cell.awaiting_gpu_end) return cell.gpu.end;
    return !finished_.empty() && &finished_.back() == &cell ? latest_gpu() : timeline::kUnknown;
  }
  [[nodiscard]] std::uint64_t cells_started() const { return started_; }
  // The highest execution_count seen (0 before any): the next cell's is usually one more.
  [[nodiscard]] std::int64_t last_execution_count() const { return last_count_; }

 private:
  struct Reading {
    std::int64_t t_ms;
    std::int64_t rss;
    std::int64_t gpu;
    std::int64_t gpu_t_ms;  // when the GPU reading was taken (at or before t_ms)
  };
  static constexpr std::size_t kReadings = 600;  // a minute at the default 10 Hz

  // A new cell in flight from `t_ms` (one still in flight ends, its idle unseen).
  void begin(std::string request_id, std::int64_t t_ms);
  void finish(std::int64_t t_ms, const char* status_if_running);
  // A finished cell the kernel announced, not yet tied to its request: IOPub's late
  // execute_input for it ties it, with IOPub's whole copy of its code.
  void adopt_request_id(std::string request_id, std::int64_t execution_count,
                        std::string_view code);
  // Cells still waiting for a sample after their end, or whose end sample was taken after
  // `next_start_ms`, get the last one from before that start.
  void settle_before(std::int64_t next_start_ms);
  static void set_end_reading(Cell& cell, const Reading& reading);
  static void set_gpu_end(Cell& cell, std::int64_t gpu);
  // The GPU reading that starts a cell at `t_ms` (see Cell::gpu_start_awaiting).
  void set_gpu_start(Cell& cell, std::int64_t t_ms) const;
  // A GPU reading taken after cells' ends: theirs, and the start of a cell that waited on it.
  void settle_gpu(const Reading& reading);
  [[nodiscard]] std::optional<Reading> reading_at(std::int64_t t_ms) const;
  [[nodiscard]] std::optional<Reading> first_reading_from(std::int64_t t_ms) const;
  [[nodiscard]] std::optional<Reading> gpu_reading_at(std::int64_t t_ms) const;
  [[nodiscard]] std::optional<Reading> first_gpu_reading_from(std::int64_t t_ms) const;
  // The highest of each quantity sampled from `from_ms` to `to_ms` (kUnknown when none).
  [[nodiscard]] Reading peak_between(std::int64_t from_ms, std::int64_t to_ms) const;

  std::size_t keep_last_;
  std::size_t max_code_bytes_;
  std::optional<Cell> in_flight_;
  std::deque<Cell> finished_;
  std::deque<Reading> readings_;
  std::uint64_t started_ = 0;
  std::int64_t last_count_ = 0;
  // The last finished cell's end and its GPU reading, kept when the cell is not (--last-cells
  // 0, or pushed out): the next cell's GPU start is that reading.
  struct LastEnd {
    std::int64_t at_ms = -1;
    std::int64_t gpu = timeline::kUnknown;
    bool awaiting = false;
  };
  LastEnd last_end_;
};

}  // namespace kwd::protocol
