#pragma once

#include <string>
#include <vector>

namespace kwd::launch {

// Why the shim cannot run in a kernel started with `argv`, when the argv itself says so: a
// Python interpreter whose options make it ignore PYTHONPATH (-I, -E) or skip site.py (-S),
// where the shim is imported. "" when the argv says nothing of it (not a Python interpreter
// by name, or one with neither option).
std::string shim_blocked_by(const std::vector<std::string>& argv);

}  // namespace kwd::launch
