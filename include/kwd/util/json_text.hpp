#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace kwd::util {

// The same text as `value.dump(indent)` (byte for byte: nlohmann's layout, key order and
// escapes), written in runs instead of a byte at a time: an executed notebook of 20 MB of
// stream text and a 5 MB image is written in milliseconds, not a fifth of a second. Strings
// that are not plain ASCII, and floating-point numbers, are left to nlohmann itself, so
// invalid UTF-8 throws as dump() does. `indent` < 0: one line, as dump() without indent.
std::string json_text(const nlohmann::json& value, int indent = -1);

using TextSink = std::function<void(std::string_view)>;

// The same text, handed to `write` in pieces of about `piece` bytes as it is made (an ASCII
// string longer than a piece in slices of it; one with other bytes is made whole, by
// nlohmann, first): an executed notebook of 25 MB is written without ever being held whole as
// text. Throws what json_text throws, possibly after some pieces.
void write_json_text(const nlohmann::json& value, int indent, const TextSink& write,
                     std::size_t piece = std::size_t{1} << 20);

}  // namespace kwd::util
