#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace kwd::report {

inline constexpr const char* kSchemaName = "kernel-watchdog/crash-report";
inline constexpr int kSchemaVersion = 1;

// "20261121T180512Z-4f6c1a2b-4242": sorts by time, names the kernel and its pid.
std::string make_report_id(std::int64_t died_at_ms, const std::string& kernel_id, int kernel_pid);

// Reports hold text from the kernel (stderr, cell code) that need not be valid UTF-8:
// invalid bytes become U+FFFD instead of failing the whole report.
std::string to_text(const nlohmann::json& document, int indent = 1);

// One line for listings: the diagnosis when there is one, else the termination.
std::string cause_line(const nlohmann::json& document);

}  // namespace kwd::report
