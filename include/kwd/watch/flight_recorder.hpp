#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kwd/util/private_files.hpp"
#include "kwd/util/unique_fd.hpp"
#include "kwd/watch/flight_record.hpp"
#include "kwd/watch/watch.hpp"

namespace kwd::watch {

// Keeps the kernel's flight record (watch/flight_record.hpp) in the report store while it
// lives: its lock taken and the record written when the kernel starts, the record rewritten
// when it says something new, both removed when the watchdog itself reports the end or the
// end was asked for. Never throws: without a usable store there is no record, said once, and
// the kernel runs as before.
class FlightRecorder {
 public:
  FlightRecorder(const std::filesystem::path& store_dir, pid_t kernel_pid,
                 std::string connection_file, std::vector<std::string> argv);
  // After each memory sample (a cell's edges take one too).
  void observe(const Watch& watch) noexcept;
  // The kernel's manager is ending it (SIGUSR2, a termination signal): a watchdog killed
  // with the kernel from now on leaves no death to report.
  void end_requested(const Watch& watch) noexcept;
  void remove() noexcept;

 private:
  [[nodiscard]] FlightRecord now(const Watch& watch) const;
  void write(FlightRecord record) noexcept;

  std::optional<util::SafeDir> dir_;
  util::UniqueFd lock_;  // held for the watchdog's life: its record's watchdog lives
  FlightRecord base_;    // who is who: the same in every version of the record
  bool end_requested_ = false;
  std::optional<FlightRecord> written_;
  std::int64_t written_steady_ms_ = 0;
  int highest_step_ = -1;  // since the cell began
  bool failed_ = false;
};

}  // namespace kwd::watch
