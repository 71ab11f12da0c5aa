#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kwd::util {

// The same text as `value.dump(indent)` (byte for byte: nlohmann's layout, key order and
// escapes), written in runs instead of a byte at a time: an executed notebook of 20 MB of
// stream text and a 5 MB image is written in milliseconds, not a fifth of a second. Strings
// that are not plain ASCII, and floating-point numbers, are left to nlohmann itself, so
// invalid UTF-8 throws as dump() does. `indent` < 0: one line, as dump() without indent.
std::string json_text(const nlohmann::json& value, int indent = -1);

}  // namespace kwd::util
