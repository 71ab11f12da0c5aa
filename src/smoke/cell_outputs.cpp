#include "kwd/smoke/cell_outputs.hpp"

#include <algorithm>

#include "kwd/protocol/content_fields.hpp"
#include "kwd/util/clock.hpp"

namespace kwd::smoke {
namespace {

std::string display_id_of(const nlohmann::json& content) {
  const auto transient = content.find("transient");
  if (transient == content.end() || !transient->is_object()) return {};
  const auto id = transient->find("display_id");
  return id != transient->end() && id->is_string() ? id->get<std::string>() : std::string();
}

nlohmann::json object_or_empty(const nlohmann::json& content, const char* key) {
  const auto it = content.find(key);
  return it != content.end() && it->is_object() ? *it : nlohmann::json::object();
}

// content[key] if it is an object, moved out of the message (a display's data may be MBs).
nlohmann::json take_object(nlohmann::json& content, const char* key) {
  const auto it = content.find(key);
  return it != content.end() && it->is_object() ? std::move(*it) : nlohmann::json::object();
}

}  // namespace

nlohmann::json& CellOutputs::outputs() {
  auto& cell = cells_[current_];
  if (!cell.contains("outputs") || !cell["outputs"].is_array())
    cell["outputs"] = nlohmann::json::array();
  return cell["outputs"];
}

std::string CellOutputs::stream_text(std::string_view name) {
  std::string text;
  for (const auto& output : outputs()) {
    if (protocol::text_field(output, "output_type") != "stream" ||
        protocol::text_field(output, "name") != name || !output["text"].is_array())
      continue;
    for (const auto& piece : output["text"])
      if (piece.is_string()) text += piece.get<std::string>();
  }
  return text;
}

void CellOutputs::begin(std::size_t index) {
  current_ = index;
  clear_pending_ = false;
  last_error_ = nullptr;
  bytes_ = 0;
  clear_now();
  cells_[current_]["execution_count"] = nullptr;
  auto& metadata = cells_[current_]["metadata"];
  if (!metadata.is_object()) metadata = nlohmann::json::object();
  metadata["execution"] = nlohmann::json::object();  // this run's, not an earlier one's
}

void CellOutputs::record_timing(const char* step, std::int64_t date_us) {
  if (date_us < 0) return;
  cells_[current_]["metadata"]["execution"][step] = util::iso8601_utc_us(date_us);
}

void CellOutputs::clear_now() {
  outputs() = nlohmann::json::array();
  for (auto& [id, places] : displays_)
    std::erase_if(places, [this](const auto& p) { return p.first == current_; });
}

void CellOutputs::add(nlohmann::json output, const nlohmann::json& content) {
  if (clear_pending_) {
    clear_now();
    clear_pending_ = false;
  }
  auto& list = outputs();
  if (const auto id = display_id_of(content); !id.empty())
    displays_[id].emplace_back(current_, list.size());
  list.push_back(std::move(output));
}

void CellOutputs::apply(protocol::Message& m) {
  auto& c = m.content;
  if (!c.is_object()) return;
  bytes_ += m.content_bytes;
  if (m.msg_type == "stream") {
    const std::string name = protocol::text_field(c, "name", "stdout");
    // A stream's text is kept as the list of what each message said (nbformat's multi-line
    // string: a list of strings, joined when read), each moved in from its message: one
    // message may hold MBs, and a cell may write hundreds of them.
    const auto found = c.find("text");
    std::string text =
        found != c.end() && found->is_string() ? std::move(found->get_ref<std::string&>()) : "";
    auto& list = outputs();
    if (!clear_pending_ && !list.empty() &&
        protocol::text_field(list.back(), "output_type") == "stream" &&
        protocol::text_field(list.back(), "name") == name && list.back()["text"].is_array()) {
      list.back()["text"].push_back(std::move(text));
      return;
    }
    nlohmann::json pieces = nlohmann::json::array();
    pieces.push_back(std::move(text));
    add({{"output_type", "stream"}, {"name", name}, {"text", std::move(pieces)}}, c);
  } else if (m.msg_type == "display_data") {
    add({{"output_type", "display_data"},
         {"data", take_object(c, "data")},
         {"metadata", take_object(c, "metadata")}},
        c);
  } else if (m.msg_type == "execute_result") {
    const auto count = c.find("execution_count");
    const nlohmann::json n = count != c.end() && count->is_number_integer() ? *count : nullptr;
    add({{"output_type", "execute_result"},
         {"execution_count", n},
         {"data", take_object(c, "data")},
         {"metadata", take_object(c, "metadata")}},
        c);
    if (!n.is_null()) cells_[current_]["execution_count"] = n;
  } else if (m.msg_type == "error") {
    nlohmann::json traceback = nlohmann::json::array();
    if (c.contains("traceback") && c["traceback"].is_array())
      for (const auto& line : c["traceback"])
        if (line.is_string()) traceback.push_back(line);
    nlohmann::json error = {{"output_type", "error"},
                            {"ename", protocol::text_field(c, "ename", "Error")},
                            {"evalue", protocol::text_field(c, "evalue")},
                            {"traceback", std::move(traceback)}};
    last_error_ = error;
    add(std::move(error), c);
  } else if (m.msg_type == "clear_output") {
    if (protocol::flag_field(c, "wait"))
      clear_pending_ = true;
    else
      clear_now();
  } else if (m.msg_type == "execute_input") {
    const auto count = c.find("execution_count");
    if (count != c.end() && count->is_number_integer())
      cells_[current_]["execution_count"] = *count;
  } else if (m.msg_type == "update_display_data") {
    apply_update(m);
  }
}

void CellOutputs::apply_update(const protocol::Message& m) {
  if (m.msg_type != "update_display_data" || !m.content.is_object()) return;
  const auto found = displays_.find(display_id_of(m.content));
  if (found == displays_.end()) return;
  for (const auto& [cell, index] : found->second) {
    auto& list = cells_[cell]["outputs"];
    if (!list.is_array() || index >= list.size()) continue;
    list[index]["data"] = object_or_empty(m.content, "data");
    list[index]["metadata"] = object_or_empty(m.content, "metadata");
  }
}

}  // namespace kwd::smoke
