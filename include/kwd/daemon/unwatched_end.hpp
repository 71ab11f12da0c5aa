#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kwd/daemon/watched_record.hpp"
#include "kwd/report/report_store.hpp"

namespace kwd::daemon {

// A kernel the daemon watched that ended while no daemon ran (it was killed, or crashed
// itself): what is known of it, and no guessed cause.
struct UnwatchedEnd {
  WatchedEntry kernel;
  std::int64_t last_watched_ms = 0;  // the daemon's last record: it was alive then
  std::int64_t found_ms = 0;         // when the daemon, started again, found the kernel gone
  // A manager removes it after a shutdown it asked for; nullopt when not looked at (a pod's
  // kernel: the path is in its container's file system).
  std::optional<bool> connection_file_present;
};

// Its record in the store: a report (kind "crash", termination "unknown", cause "unknown")
// whose headline says it ended while unwatched, and between which times.
nlohmann::json unwatched_end_report(const UnwatchedEnd& end, const std::string& id);

}  // namespace kwd::daemon
