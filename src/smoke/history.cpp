#include "kwd/smoke/history.hpp"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "kwd/util/private_files.hpp"

namespace kwd::smoke {
namespace {

// The second format's marker and its version: a first-format file is an object of numbers,
// so a key with an object value can only be the second's.
constexpr const char* kFormatKey = "kernel-watchdog-history";
constexpr int kFormatVersion = 2;

[[noreturn]] void bad(const std::filesystem::path& file, const std::string& why) {
  throw std::runtime_error(file.string() + ": " + why);
}

std::optional<std::int64_t> bytes_field(const std::filesystem::path& file, const std::string& key,
                                        const nlohmann::json& record, const char* field) {
  const auto found = record.find(field);
  if (found == record.end() || found->is_null()) return std::nullopt;
  if (!found->is_number_integer() || found->get<std::int64_t>() < 0)
    bad(file, "\"" + key + "\": " + field + " is not a number of bytes");
  return found->get<std::int64_t>();
}

NotebookRecord read_record(const std::filesystem::path& file, const std::string& key,
                           const nlohmann::json& value) {
  if (!value.is_object()) bad(file, "\"" + key + "\" is not an object of seconds and peaks");
  NotebookRecord record;
  if (const auto seconds = value.find("seconds"); seconds != value.end() && !seconds->is_null()) {
    if (!seconds->is_number() || seconds->get<double>() < 0)
      bad(file, "\"" + key + "\" has no number of seconds");
    record.seconds = seconds->get<double>();
  }
  record.peak_rss = bytes_field(file, key, value, "peak_rss");
  record.peak_gpu = bytes_field(file, key, value, "peak_gpu");
  return record;
}

}  // namespace

History load_history(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) {
    std::error_code error;
    if (!std::filesystem::exists(file, error)) return {};
    bad(file, "cannot be read");
  }
  const auto json = nlohmann::json::parse(in, nullptr, false);
  if (!json.is_object()) bad(file, "not a history file (a JSON object; see docs/smoke-history.md)");
  History out;
  if (const auto format = json.find(kFormatKey); format != json.end()) {
    if (!format->is_number_integer() || format->get<int>() != kFormatVersion)
      bad(file, std::string("\"") + kFormatKey + "\" is " + format->dump() + ", this smoke reads " +
                    std::to_string(kFormatVersion));
    const auto notebooks = json.find("notebooks");
    if (notebooks == json.end() || !notebooks->is_object()) bad(file, "no \"notebooks\" object");
    for (const auto& [key, value] : notebooks->items())
      out[key] = read_record(file, key, value);
    return out;
  }
  // The first format: notebook -> seconds.
  for (const auto& [key, value] : json.items()) {
    if (!value.is_number() || value.get<double>() < 0)
      bad(file, "\"" + key + "\" has no number of seconds");
    out[key].seconds = value.get<double>();
  }
  return out;
}

void store_history(const std::filesystem::path& file, const History& measured) {
  History all = load_history(file);
  for (const auto& [key, record] : measured) {
    NotebookRecord& kept = all[key];
    // Not captured as `record`: a structured binding cannot be, before clang 16.
    const bool cut_short = record.cut_short;
    const auto merge = [cut_short](auto& slot, const auto& measured_value) {
      if (measured_value && (!cut_short || !slot || *slot < *measured_value)) slot = measured_value;
    };
    merge(kept.seconds, record.seconds);
    merge(kept.peak_rss, record.peak_rss);
    merge(kept.peak_gpu, record.peak_gpu);
  }
  nlohmann::json notebooks = nlohmann::json::object();
  for (const auto& [key, record] : all) {
    nlohmann::json entry = nlohmann::json::object();
    if (record.seconds) entry["seconds"] = std::round(*record.seconds * 1000) / 1000;
    if (record.peak_rss) entry["peak_rss"] = *record.peak_rss;
    if (record.peak_gpu) entry["peak_gpu"] = *record.peak_gpu;
    notebooks[key] = std::move(entry);
  }
  const nlohmann::json json = {{kFormatKey, kFormatVersion}, {"notebooks", std::move(notebooks)}};
  const auto absolute = std::filesystem::absolute(file);
  util::write_file_atomically(absolute.parent_path(), absolute.filename().string(),
                              json.dump(2) + "\n", 0644);
}

Durations durations_of(const History& history) {
  Durations out;
  for (const auto& [key, record] : history)
    if (record.seconds) out[key] = *record.seconds;
  return out;
}

}  // namespace kwd::smoke
