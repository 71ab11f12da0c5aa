#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace kwd::launch {

// The notebook learns why its last kernel died. When a wrapped kernel dies, the watchdog
// leaves a notice keyed by the kernel id (the connection file's); the manager restarts the
// kernel with the same connection file, the next watchdog claims the notice (exactly one
// claimant: it is removed as it is read) and hands it to the kernel through the shim, which
// shows it once, above the output of the first cell run after the restart.
//
// Notices live in a private directory: $XDG_RUNTIME_DIR/kernel-watchdog/notices when usable,
// else ${TMPDIR:-/tmp}/kernel-watchdog-UID/notices (every directory on the way checked, see
// util::SafeDir). Nothing here ever stops a kernel: failures are logged at debug and dropped.

// {"text": ..., "markdown": ..., "report": ...}: the report's headline, when the kernel died,
// and the command that shows the report.
nlohmann::json death_notice(const nlohmann::json& report, const std::filesystem::path& report_path);

// Leaves (or replaces an unclaimed older) notice for the kernel's next start.
void leave_death_notice(const std::string& kernel_id, const nlohmann::json& notice) noexcept;

// The notice left for this kernel, removed as it is taken; nothing when there is none.
std::optional<std::string> claim_death_notice(const std::string& kernel_id) noexcept;

}  // namespace kwd::launch
