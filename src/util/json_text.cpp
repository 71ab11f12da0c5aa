#include "kwd/util/json_text.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace kwd::util {
namespace {

// Which ASCII bytes a JSON string cannot hold as they are, and how dump() writes them.
constexpr std::array<bool, 128> kNeedsEscape = [] {
  std::array<bool, 128> table{};
  for (int c = 0; c < 0x20; ++c)
    table[static_cast<std::size_t>(c)] = true;
  table['"'] = true;
  table['\\'] = true;
  return table;
}();

void append_escape(std::string& out, unsigned char c) {
  switch (c) {
    case '"':
      out += "\\\"";
      return;
    case '\\':
      out += "\\\\";
      return;
    case '\b':
      out += "\\b";
      return;
    case '\f':
      out += "\\f";
      return;
    case '\n':
      out += "\\n";
      return;
    case '\r':
      out += "\\r";
      return;
    case '\t':
      out += "\\t";
      return;
    default: {
      static constexpr char hex[] = "0123456789abcdef";
      const char code[] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 0xF]};
      out.append(code, sizeof code);
    }
  }
}

// Eight bytes at a time: whether any is above ASCII, or one a JSON string must escape
// (below 0x20, '"' or '\\'). Most text in a notebook has neither: it is copied in runs.
constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
constexpr std::uint64_t kHighs = 0x8080808080808080ULL;
constexpr std::uint64_t has_zero_byte(std::uint64_t v) {
  return (v - kOnes) & ~v & kHighs;
}
constexpr std::uint64_t has_special_byte(std::uint64_t w) {
  return (w & kHighs) | has_zero_byte(w & ~kHighs & (kOnes * 0x60)) |
         has_zero_byte(w ^ (kOnes * '"')) | has_zero_byte(w ^ (kOnes * '\\'));
}

// A quoted string; false (nothing written) when it holds a byte above ASCII.
bool append_ascii_string(std::string& out, std::string_view text) {
  const std::size_t start = out.size();
  out += '"';
  std::size_t run = 0, i = 0;
  const std::size_t n = text.size();
  while (i < n) {
    if (i + 8 <= n) {
      std::uint64_t word;
      std::memcpy(&word, text.data() + i, sizeof word);
      if (has_special_byte(word) == 0) {
        i += 8;
        continue;
      }
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      out.resize(start);
      return false;
    }
    if (kNeedsEscape[c]) {
      out.append(text.data() + run, i - run);
      append_escape(out, c);
      run = i + 1;
    }
    ++i;
  }
  out.append(text.data() + run, n - run);
  out += '"';
  return true;
}

void append_string(std::string& out, const std::string& text) {
  if (!append_ascii_string(out, text)) out += nlohmann::json(text).dump();
}

template <typename Integer>
void append_integer(std::string& out, Integer n) {
  char buf[24];
  const auto end = std::to_chars(buf, buf + sizeof buf, n).ptr;
  out.append(buf, end);
}

void append_value(std::string& out, const nlohmann::json& value, int indent, int depth);

void newline(std::string& out, int indent, int level) {
  out += '\n';
  out.append(static_cast<std::size_t>(level) * static_cast<std::size_t>(indent), ' ');
}

// An object's members or an array's items, laid out as dump() lays them out.
void append_container(std::string& out, const nlohmann::json& value, int indent, int depth) {
  const bool object = value.is_object();
  if (value.empty()) {
    out += object ? "{}" : "[]";
    return;
  }
  out += object ? '{' : '[';
  for (auto it = value.begin(); it != value.end(); ++it) {
    if (it != value.begin()) out += ',';
    if (indent >= 0) newline(out, indent, depth + 1);
    if (object) {
      append_string(out, it.key());
      out += indent >= 0 ? ": " : ":";
    }
    append_value(out, it.value(), indent, depth + 1);
  }
  if (indent >= 0) newline(out, indent, depth);
  out += object ? '}' : ']';
}

void append_value(std::string& out, const nlohmann::json& value, int indent, int depth) {
  using value_t = nlohmann::json::value_t;
  switch (value.type()) {
    case value_t::object:
    case value_t::array:
      append_container(out, value, indent, depth);
      return;
    case value_t::string:
      append_string(out, value.get_ref<const std::string&>());
      return;
    case value_t::boolean:
      out += value.get<bool>() ? "true" : "false";
      return;
    case value_t::null:
      out += "null";
      return;
    case value_t::number_integer:
      append_integer(out, value.get<std::int64_t>());
      return;
    case value_t::number_unsigned:
      append_integer(out, value.get<std::uint64_t>());
      return;
    default:  // floats (nlohmann's shortest round-trip form), binary, discarded
      out += value.dump();
      return;
  }
}

// About how long the text will be (strings, and a little for every value and its indent),
// so that a large document is not copied again each time the output doubles.
std::size_t size_hint(const nlohmann::json& value, std::size_t per_value) {
  const auto add = [](std::size_t a, std::size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; };
  if (value.is_string()) return add(value.get_ref<const std::string&>().size(), per_value);
  if (value.is_binary()) return SIZE_MAX;  // not written here (see json_text)
  std::size_t size = per_value;
  if (value.is_object())
    for (const auto& [key, member] : value.items())
      size = add(size, add(key.size(), size_hint(member, per_value)));
  else if (value.is_array())
    for (const auto& item : value)
      size = add(size, size_hint(item, per_value));
  return size;
}

}  // namespace

std::string json_text(const nlohmann::json& value, int indent) {
  std::string out;
  const std::size_t hint = size_hint(value, 8 + static_cast<std::size_t>(std::max(indent, 0)) * 4);
  // Binary values (never in what we read or write; JSON text has none) are laid out by
  // nlohmann itself.
  if (hint >= SIZE_MAX / 2) return value.dump(indent);
  out.reserve(hint);
  append_value(out, value, indent, 0);
  return out;
}

}  // namespace kwd::util
