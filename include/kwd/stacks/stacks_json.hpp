#pragma once

#include <nlohmann/json_fwd.hpp>

#include "kwd/stacks/crash.hpp"
#include "kwd/stacks/stacks.hpp"

namespace kwd::stacks {

// The `stacks` object of a report and of `kernel-watchdog stacks --json` (docs/report-format.md).
nlohmann::json to_json(const ProcessStacks& stacks);

// The `crash_stack` object of a crash report: the faulting thread's native frames.
nlohmann::json to_json(const CrashStack& crash);

// Native frames as the unwinding child hands them to its parent, and back.
nlohmann::json frames_to_json(const std::vector<NativeFrame>& frames);
std::vector<NativeFrame> frames_from_json(const nlohmann::json& frames);

}  // namespace kwd::stacks
