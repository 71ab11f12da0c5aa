#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "kwd/protocol/wire.hpp"

namespace kwd::smoke {

// Turns the IOPub messages of each executed cell into its nbformat outputs, as nbclient
// does: stream, display_data, execute_result and error appended; consecutive writes to the
// same stream joined (as front ends show them: one output whose text is the list of the
// pieces, an nbformat multi-line string); clear_output (with wait: at the next output)
// and update_display_data (every output with that display_id, in any cell) applied.
class CellOutputs {
 public:
  // `cells`: the notebook's "cells" array, which must outlive this.
  explicit CellOutputs(nlohmann::json& cells) : cells_(cells) {}

  // The cell at `index` starts executing: its outputs are cleared.
  void begin(std::size_t index);
  // When the kernel stamped one step of the current cell (a message header's date), under
  // metadata.execution as nbclient records it: "iopub.status.busy", "iopub.execute_input",
  // "shell.execute_reply", "iopub.status.idle". A date of -1 (none) is left out.
  void record_timing(const char* step, std::int64_t date_us);
  // An IOPub message whose parent is the current cell's execute_request. Its text and data
  // are moved into the notebook, not copied: the message is spent.
  void apply(protocol::Message& message);
  // A message from anywhere that may update a display shown earlier.
  void apply_update(const protocol::Message& message);

  // The last error output of the current cell: ename, evalue, traceback.
  [[nodiscard]] const nlohmann::json& last_error() const { return last_error_; }
  // What the current cell wrote on one stream ("stderr"), joined.
  [[nodiscard]] std::string stream_text(std::string_view name);
  // Bytes of output text and data received for the current cell.
  [[nodiscard]] std::size_t bytes() const { return bytes_; }

 private:
  nlohmann::json& outputs();
  void add(nlohmann::json output, const nlohmann::json& content);
  void clear_now();

  nlohmann::json& cells_;
  std::size_t current_ = 0;
  bool clear_pending_ = false;
  nlohmann::json last_error_;
  std::size_t bytes_ = 0;
  // display_id -> (cell index, output index) of every output that shows it.
  std::map<std::string, std::vector<std::pair<std::size_t, std::size_t>>> displays_;
};

}  // namespace kwd::smoke
