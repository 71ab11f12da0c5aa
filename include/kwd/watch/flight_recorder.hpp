#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kwd/util/private_files.hpp"
#include "kwd/watch/flight_record.hpp"
#include "kwd/watch/watch.hpp"

namespace kwd::watch {

// Keeps the kernel's flight record (watch/flight_record.hpp) in the report store while it
// lives: written when the kernel starts, rewritten when it says something new, removed when
// the watchdog itself reports the end (or the end was asked for). Never throws: without a
// usable store there is no record, said once, and the kernel runs as before.
class FlightRecorder {
 public:
  FlightRecorder(const std::filesystem::path& store_dir, pid_t kernel_pid,
                 std::string connection_file, std::vector<std::string> argv);
  // After each memory sample (a cell's edges take one too).
  void observe(const Watch& watch) noexcept;
  void remove() noexcept;

 private:
  [[nodiscard]] FlightRecord now(const Watch& watch) const;
  void write(FlightRecord record) noexcept;

  std::optional<util::SafeDir> dir_;
  FlightRecord base_;  // who is who: the same in every version of the record
  std::optional<FlightRecord> written_;
  bool failed_ = false;
};

}  // namespace kwd::watch
