#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace kwd::report {

// One section of a report below the diagnosis (termination, kernel, watchdog, execution,
// cgroup, system_memory, oom_evidence, heartbeat, protocol, probes, notes) said in sentences
// for the HTML page: times as the reader's local time and as how long before the death, sizes
// in MiB/GiB, no field names, epoch numbers or JSON pointers (the raw JSON is the page's last
// part). Empty when the section is not one of these (the page shows it as a table).
std::optional<std::string> section_in_words(std::string_view key, const nlohmann::json& report);

// "12:05:03 (4.2 s before the death)": an epoch time in milliseconds for the reader.
std::string time_in_words(double unix_ms, double died_at_ms);

}  // namespace kwd::report
