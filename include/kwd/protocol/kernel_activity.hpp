#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kwd/protocol/cell_timeline.hpp"
#include "kwd/protocol/wire.hpp"
#include "kwd/timeline/memory_sample.hpp"
#include "kwd/util/byte_ring.hpp"

namespace kwd::protocol {

// The last error the user was shown (an `error` message on IOPub).
struct ShownError {
  std::int64_t execution_count = -1;  // of the cell it came from, when known
  std::string ename;
  std::string evalue;
  std::vector<std::string> traceback;  // capped
};

// What the kernel is doing, as its IOPub messages tell it: execution state, the cells and
// their outputs, the last error, the stderr stream, and whether a shutdown was asked for.
class KernelActivity {
 public:
  // When the kernel made the message (its header's date), or `now_ms` when that is missing
  // or far from the watchdog's clock: the time cells and their edges are placed by.
  static std::int64_t made_at(const Message& m, std::int64_t now_ms);
  explicit KernelActivity(std::size_t last_cells);

  void on_message(const Message& message, std::int64_t now_ms);
  // The kernel said, before running it, that cell `execution_count` starts (the shim's
  // pre_run_cell record): the cell in flight even when IOPub never gets to say so.
  void on_cell_announced(std::int64_t execution_count, std::string_view code, bool truncated,
                         std::int64_t now_ms);
  void on_memory_sample(const timeline::MemorySample& sample) { cells_.on_memory_sample(sample); }

  // "busy", "idle", "starting"; nullopt before the first status message.
  [[nodiscard]] const std::optional<std::string>& execution_state() const { return state_; }
  // When the first status other than "starting" arrived (watchdog clock): the kernel's own
  // start-up (imports, its first allocations) is over by then.
  [[nodiscard]] std::optional<std::int64_t> ready_at_ms() const { return ready_at_ms_; }
  // A shutdown_reply was published: the manager asked the kernel to stop.
  [[nodiscard]] bool shutdown_requested() const { return shutdown_requested_; }
  [[nodiscard]] const CellTimeline& cells() const { return cells_; }
  [[nodiscard]] const std::optional<ShownError>& last_error() const { return last_error_; }
  [[nodiscard]] std::string stderr_tail() const { return stderr_stream_.contents(); }

  // The report's `execution` section at `at_ms` (death or hang).
  [[nodiscard]] nlohmann::json to_json(std::int64_t at_ms) const;

 private:
  void on_error(const Message& message);

  std::optional<std::string> state_;
  std::optional<std::int64_t> ready_at_ms_;
  bool shutdown_requested_ = false;
  CellTimeline cells_;
  std::optional<ShownError> last_error_;
  util::ByteRing stderr_stream_;
};

}  // namespace kwd::protocol
