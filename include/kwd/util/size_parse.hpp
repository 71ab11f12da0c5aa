#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kwd::util {

// "300M", "1.5G", "512KiB", "4096" (bytes) -> bytes. Powers of 1024, as `free -h` and
// cgroup tools mean them. nullopt when the text is not a size.
std::optional<std::uint64_t> parse_size(std::string_view text);

// 3221225472 -> "3.0 GiB"
std::string format_bytes(double bytes);
// The same for a count of bytes (memory is measured in whole bytes everywhere).
template <std::integral Count>
std::string format_bytes(Count bytes) {
  return format_bytes(static_cast<double>(bytes));
}

}  // namespace kwd::util
