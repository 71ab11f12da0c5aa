#pragma once

// The input format of the wire and IOPub targets: parts separated by the byte 0x1e (ASCII
// record separator, which JSON text cannot hold outside a string's escapes), so that seeds
// are real frames written one after the other.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace kwd::fuzz {

inline std::vector<std::string_view> split_parts(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> parts;
  std::size_t from = 0;
  for (;;) {
    const std::size_t at = text.find('\x1e', from);
    parts.push_back(
        text.substr(from, at == std::string_view::npos ? text.size() - from : at - from));
    if (at == std::string_view::npos) return parts;
    from = at + 1;
  }
}

}  // namespace kwd::fuzz
