#include "kwd/diagnosis/signature_table.hpp"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "kwd/data/embedded_files.hpp"
#include "kwd/diagnosis/causes.hpp"
#include "kwd/diagnosis/pattern_literals.hpp"
#include "kwd/util/errno_text.hpp"

namespace kwd::diagnosis {
namespace {

// What a signature may say it supports: a cause a stderr line can show, or "context".
bool supportable(std::string_view supports) {
  if (supports == "context") return true;
  const Cause* c = find_cause(supports);
  return c != nullptr && c->shown_by_stderr;
}
const std::set<std::string> kStrengths{"strong", "supporting", "weak"};

std::string required(const nlohmann::json& entry, const char* key, const std::string& where) {
  if (!entry.contains(key) || !entry[key].is_string() || entry[key].get<std::string>().empty())
    throw TableError(where + ": '" + key + "' must be a non-empty string");
  return entry[key].get<std::string>();
}

}  // namespace

SignatureTable SignatureTable::parse(std::string_view json_text, std::string origin) {
  const auto doc = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("signatures") ||
      !doc["signatures"].is_array())
    throw TableError(origin + ": not a signature table (no 'signatures' array)");
  SignatureTable table;
  table.origin_ = std::move(origin);
  table.version_ = doc.value("version", 0);
  std::set<std::string> ids;
  for (std::size_t i = 0; i < doc["signatures"].size(); ++i) {
    const auto& entry = doc["signatures"][i];
    const std::string where = table.origin_ + ": signature " + std::to_string(i);
    Signature s;
    s.id = required(entry, "id", where);
    const std::string named = where + " (" + s.id + ")";
    s.family = required(entry, "family", named);
    s.pattern = required(entry, "pattern", named);
    s.example = required(entry, "example", named);
    s.meaning = required(entry, "meaning", named);
    s.supports = required(entry, "supports", named);
    s.strength = required(entry, "strength", named);
    s.remedy = entry.value("remedy", "");
    s.source = required(entry, "source", named);
    if (!supportable(s.supports))
      throw TableError(named + ": 'supports' is not a cause: " + s.supports);
    if (!kStrengths.contains(s.strength))
      throw TableError(named + ": 'strength' must be strong, supporting or weak");
    if (!s.source.starts_with("https://"))
      throw TableError(named + ": 'source' must be an https link to a public report");
    if (!ids.insert(s.id).second) throw TableError(named + ": duplicate id");
    try {
      s.regex = std::regex(s.pattern, std::regex::ECMAScript | std::regex::optimize);
      s.literals = required_literals(s.pattern);
    } catch (const std::regex_error& e) {
      throw TableError(named + ": bad pattern: " + e.what());
    }
    table.signatures_.push_back(std::move(s));
  }
  return table;
}

const SignatureTable& SignatureTable::active() {
  static const SignatureTable table = [] {
    if (const char* path = std::getenv("KERNEL_WATCHDOG_SIGNATURES"); path && *path) {
      errno = 0;
      std::ifstream in(path);
      const int open_error = errno;
      std::stringstream text;
      text << in.rdbuf();
      try {
        if (!in) throw TableError(util::cannot("read", path, open_error));
        return parse(text.str(), path);
      } catch (const TableError& e) {
        spdlog::warn("KERNEL_WATCHDOG_SIGNATURES ignored, using the built-in table: {}", e.what());
      }
    }
    return parse(data::signatures_json(), "built-in");
  }();
  return table;
}

const Signature* SignatureTable::find(std::string_view id) const {
  for (const auto& s : signatures_)
    if (s.id == id) return &s;
  return nullptr;
}

}  // namespace kwd::diagnosis
