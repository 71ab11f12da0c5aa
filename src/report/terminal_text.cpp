#include "kwd/report/terminal_text.hpp"

#include <cstdint>

namespace kwd::report {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The length of the well-formed UTF-8 sequence at the start of `s`, or 0.
std::size_t utf8_length(std::string_view s) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const auto continuation = [&](std::size_t i) { return i < s.size() && (byte(i) & 0xC0) == 0x80; };
  const unsigned char lead = byte(0);
  std::size_t n = 0;
  std::uint32_t min = 0;
  std::uint32_t cp = 0;
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) {
    n = 2, min = 0x80, cp = lead & 0x1Fu;
  } else if ((lead & 0xF0) == 0xE0) {
    n = 3, min = 0x800, cp = lead & 0x0Fu;
  } else if ((lead & 0xF8) == 0xF0) {
    n = 4, min = 0x10000, cp = lead & 0x07u;
  } else {
    return 0;
  }
  for (std::size_t i = 1; i < n; ++i) {
    if (!continuation(i)) return 0;
    cp = (cp << 6) | (byte(i) & 0x3Fu);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

}  // namespace

std::string terminal_safe(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      ++i;  // CRLF: the newline alone
      continue;
    }
    if (c < 0x80) {
      const bool control = (c < 0x20 && c != '\t' && c != '\n') || c == 0x7F;
      if (control)
        out += kReplacement;
      else
        out += static_cast<char>(c);
      ++i;
      continue;
    }
    const std::size_t n = utf8_length(text.substr(i));
    // C1 controls (U+0080..U+009F, C2 80..C2 9F): some terminals act on them like ESC.
    const bool c1 = n == 2 && c == 0xC2 && static_cast<unsigned char>(text[i + 1]) <= 0x9F;
    if (n == 0 || c1) {
      out += kReplacement;
      i += n == 0 ? 1 : n;
    } else {
      out += text.substr(i, n);
      i += n;
    }
  }
  return out;
}

std::string without_ansi_sequences(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b' && i + 1 < text.size() && text[i + 1] == '[') {
      std::size_t j = i + 2;
      while (j < text.size() && !(text[j] >= 0x40 && text[j] <= 0x7e))
        ++j;
      i = j;  // the final byte is skipped with the rest
      continue;
    }
    out += text[i];
  }
  return out;
}

}  // namespace kwd::report
