#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

namespace kwd::protocol {

// A field of a message's content, as the kernel sent it: anything may be missing or of the
// wrong type (a forged or buggy message). nlohmann's value() throws on a wrong type; these
// read it as "not given" instead.
inline std::string text_field(const nlohmann::json& content, const char* name,
                              std::string fallback = {}, std::size_t cap = std::string::npos) {
  if (!content.is_object()) return fallback;
  const auto it = content.find(name);
  if (it == content.end() || !it->is_string()) return fallback;
  return it->get_ref<const std::string&>().substr(0, cap);
}

inline bool flag_field(const nlohmann::json& content, const char* name, bool fallback = false) {
  if (!content.is_object()) return fallback;
  const auto it = content.find(name);
  return it != content.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

}  // namespace kwd::protocol
