#include "kwd/util/json_text.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace kwd::util {
namespace {

// The text being made: whole (json_text), or handed on in pieces of about `piece` bytes
// (write_json_text), so that a document of many MB is never held as text at once.
class TextOut {
 public:
  TextOut(const TextSink* sink, std::size_t piece) : sink_(sink), piece_(piece) {}
  std::string& text() { return text_; }
  [[nodiscard]] bool in_pieces() const { return sink_ != nullptr; }
  [[nodiscard]] std::size_t piece() const { return piece_; }
  // Hands on what is made so far once it fills a piece.
  void pass_on_if_full() {
    if (sink_ != nullptr && text_.size() >= piece_) pass_on();
  }
  void pass_on() {
    if (sink_ != nullptr && !text_.empty()) (*sink_)(text_);
    text_.clear();
  }

 private:
  std::string text_;
  const TextSink* sink_;
  std::size_t piece_;
};

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

bool is_special(unsigned char c) {
  return c >= 0x80 || kNeedsEscape[c];
}

// Where in [from, to) the first byte above ASCII or needing an escape is; `to` if none. Output
// of many MB (a stream, a base64 image) is almost all plain bytes, so the scan is what costs.
std::size_t next_special(const char* p, std::size_t from, std::size_t to) {
  std::size_t i = from;
#ifdef __SSE2__
  // Sixteen at a time (every x86-64 has SSE2). Compared as signed bytes, those above ASCII are
  // negative, so one "less than 0x20" finds them and the control characters together.
  const __m128i space = _mm_set1_epi8(0x20);
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  for (; i + 16 <= to; i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    const __m128i special =
        _mm_or_si128(_mm_cmplt_epi8(v, space),
                     _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)));
    if (const int mask = _mm_movemask_epi8(special); mask != 0)
      return i + static_cast<std::size_t>(std::countr_zero(static_cast<unsigned>(mask)));
  }
#endif
  for (; i + 8 <= to; i += 8) {
    std::uint64_t word;
    std::memcpy(&word, p + i, sizeof word);
    if (has_special_byte(word) != 0) break;
  }
  for (; i < to; ++i)
    if (is_special(static_cast<unsigned char>(p[i]))) return i;
  return to;
}

bool is_ascii(std::string_view text) {
  std::size_t i = 0;
  for (; i + 8 <= text.size(); i += 8) {
    std::uint64_t word;
    std::memcpy(&word, text.data() + i, sizeof word);
    if ((word & kHighs) != 0) return false;
  }
  return std::all_of(text.begin() + static_cast<std::ptrdiff_t>(i), text.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

// A quoted string; false (nothing written) when it holds a byte above ASCII. One longer than
// a piece is handed on in slices as it is escaped: it is checked for ASCII first, because
// what was handed on cannot be taken back.
bool append_ascii_string(TextOut& text_out, std::string_view text) {
  const bool sliced = text_out.in_pieces() && text.size() > text_out.piece();
  if (sliced && !is_ascii(text)) return false;
  std::string& out = text_out.text();
  const std::size_t start = out.size();
  out += '"';
  const char* p = text.data();
  const std::size_t n = text.size();
  std::size_t i = 0;
  std::size_t slice_end = sliced ? text_out.piece() : n;
  while (i < n) {
    const std::size_t limit = std::min(n, slice_end);
    const std::size_t j = next_special(p, i, limit);
    out.append(p + i, j - i);
    i = j;
    if (j == limit) {
      if (sliced) {
        text_out.pass_on_if_full();
        slice_end = i + text_out.piece();
      }
      continue;
    }
    const auto c = static_cast<unsigned char>(p[j]);
    if (c >= 0x80) {
      out.resize(start);
      return false;
    }
    append_escape(out, c);
    ++i;
  }
  out += '"';
  return true;
}

void append_string(TextOut& out, const std::string& text) {
  if (!append_ascii_string(out, text)) out.text() += nlohmann::json(text).dump();
}

template <typename Integer>
void append_integer(std::string& out, Integer n) {
  char buf[24];
  const auto end = std::to_chars(buf, buf + sizeof buf, n).ptr;
  out.append(buf, end);
}

void append_value(TextOut& out, const nlohmann::json& value, int indent, int depth);

void newline(std::string& out, int indent, int level) {
  out += '\n';
  out.append(static_cast<std::size_t>(level) * static_cast<std::size_t>(indent), ' ');
}

// An object's members or an array's items, laid out as dump() lays them out.
void append_container(TextOut& text_out, const nlohmann::json& value, int indent, int depth) {
  std::string& out = text_out.text();
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
      append_string(text_out, it.key());
      out += indent >= 0 ? ": " : ":";
    }
    append_value(text_out, it.value(), indent, depth + 1);
    text_out.pass_on_if_full();
  }
  if (indent >= 0) newline(out, indent, depth);
  out += object ? '}' : ']';
}

void append_value(TextOut& text_out, const nlohmann::json& value, int indent, int depth) {
  using value_t = nlohmann::json::value_t;
  std::string& out = text_out.text();
  switch (value.type()) {
    case value_t::object:
    case value_t::array:
      append_container(text_out, value, indent, depth);
      return;
    case value_t::string:
      append_string(text_out, value.get_ref<const std::string&>());
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
  const std::size_t hint = size_hint(value, 8 + static_cast<std::size_t>(std::max(indent, 0)) * 4);
  // Binary values (never in what we read or write; JSON text has none) are laid out by
  // nlohmann itself.
  if (hint >= SIZE_MAX / 2) return value.dump(indent);
  TextOut out(nullptr, 0);
  out.text().reserve(hint);
  append_value(out, value, indent, 0);
  return std::move(out.text());
}

void write_json_text(const nlohmann::json& value, int indent, const TextSink& write,
                     std::size_t piece) {
  piece = std::max<std::size_t>(piece, 64);
  if (size_hint(value, 0) >= SIZE_MAX / 2) {
    write(value.dump(indent));
    return;
  }
  TextOut out(&write, piece);
  out.text().reserve(2 * piece);
  append_value(out, value, indent, 0);
  out.pass_on();
}

}  // namespace kwd::util
