#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace kwd::launch {

// A cell the kernel says is starting (the shim's pre_run_cell record), before it runs.
struct CellAnnouncement {
  std::int64_t execution_count = -1;
  std::string code;
  bool truncated = false;
  // When the cell started, by the kernel's clock (epoch ms); 0 when the record does not say.
  // Records are read in batches, not as they come: this is the cell's start, not the read.
  std::int64_t at_ms = 0;
};

// What arrives on the faulthandler pipe, split in two: faulthandler's own text (a dying
// kernel's Python stack) and the shim's records, one line each, framed as
// "\x1ekwd-cell {json}\n" (a byte faulthandler never writes, one atomic write each): a cell
// announcement each, "\x1ekwd-shim {}\n" once, as the shim starts in the kernel, and
// "\x1ekwd-shim {"cells": true}\n" once it will announce cells (an IPython kernel's shell).
class FaultChannel {
 public:
  using OnCell = std::function<void(CellAnnouncement)>;

  explicit FaultChannel(std::size_t text_limit) : text_limit_(text_limit) {}

  void feed(std::string_view bytes, const OnCell& on_cell);
  // Faulthandler's text so far (a record cut short by the death included); emptied.
  std::string take_text();
  [[nodiscard]] bool has_text() const { return !text_.empty(); }
  // The shim said it runs in the kernel (its first record).
  [[nodiscard]] bool shim_started() const { return shim_started_; }
  // ... and that it announces cells (it found an IPython shell to hook).
  [[nodiscard]] bool announces_cells() const { return announces_cells_; }

 private:
  void keep_text(std::string_view bytes);
  static bool parse(std::string_view record, CellAnnouncement& out);

  std::size_t text_limit_;
  std::string pending_;  // from a record's first byte, until its newline arrives
  std::string text_;
  bool shim_started_ = false;
  bool announces_cells_ = false;
};

}  // namespace kwd::launch
