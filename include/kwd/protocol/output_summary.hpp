#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "kwd/protocol/wire.hpp"

namespace kwd::protocol {

// What a cell showed, in fixed memory: byte counts per stream, and for rich outputs only
// their kind, size and MIME types (never the data itself).
class OutputSummary {
 public:
  static constexpr std::size_t kKeptDisplays = 5;

  struct Display {
    std::string msg_type;  // execute_result, display_data, update_display_data
    std::size_t bytes = 0;
    std::vector<std::string> mime_types;
  };

  // Takes stream, error, execute_result, display_data and update_display_data; ignores
  // everything else.
  void add(const Message& message);

  [[nodiscard]] std::uint64_t stdout_bytes() const noexcept { return stdout_bytes_; }
  [[nodiscard]] std::uint64_t stderr_bytes() const noexcept { return stderr_bytes_; }
  [[nodiscard]] std::uint64_t displays() const noexcept { return displays_; }
  [[nodiscard]] std::uint64_t errors() const noexcept { return errors_; }
  [[nodiscard]] const std::deque<Display>& last_displays() const noexcept { return last_; }
  // {"stdout_bytes", "stderr_bytes", "displays", "errors", "last_displays": [...]}
  [[nodiscard]] nlohmann::json to_json() const;

 private:
  std::uint64_t stdout_bytes_ = 0;
  std::uint64_t stderr_bytes_ = 0;
  std::uint64_t displays_ = 0;
  std::uint64_t errors_ = 0;
  std::deque<Display> last_;
};

}  // namespace kwd::protocol
