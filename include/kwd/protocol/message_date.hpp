#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kwd::protocol {

// A header's "date" (ISO 8601, as jupyter_client writes it: "2026-11-21T18:11:02.560688Z",
// or with an offset, or without a zone, taken as UTC) in microseconds since the epoch: the
// precision kernels send, and nbclient keeps in a notebook.
std::optional<std::int64_t> parse_message_date_us(std::string_view iso);

}  // namespace kwd::protocol
