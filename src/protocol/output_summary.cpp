#include "kwd/protocol/output_summary.hpp"

#include <nlohmann/json.hpp>

namespace kwd::protocol {
namespace {

constexpr std::size_t kMaxMimeTypes = 16;

}  // namespace

void OutputSummary::add(const Message& m) {
  const auto& c = m.content;
  if (m.msg_type == "stream") {
    const auto text = c.find("text");
    const std::size_t n =
        text != c.end() && text->is_string() ? text->get_ref<const std::string&>().size() : 0;
    const auto name = c.find("name");
    if (name != c.end() && *name == "stderr")
      stderr_bytes_ += n;
    else
      stdout_bytes_ += n;
    return;
  }
  if (m.msg_type == "error") {
    ++errors_;
    return;
  }
  if (m.msg_type != "execute_result" && m.msg_type != "display_data" &&
      m.msg_type != "update_display_data")
    return;
  ++displays_;
  Display d;
  d.msg_type = m.msg_type;
  d.bytes = m.content_bytes + m.buffer_bytes;
  const auto data = c.find("data");
  if (data != c.end() && data->is_object())
    for (const auto& [mime, value] : data->items()) {
      if (d.mime_types.size() >= kMaxMimeTypes) break;
      d.mime_types.push_back(mime.substr(0, 128));
    }
  last_.push_back(std::move(d));
  if (last_.size() > kKeptDisplays) last_.pop_front();
}

nlohmann::json OutputSummary::to_json() const {
  auto displays = nlohmann::json::array();
  for (const auto& d : last_)
    displays.push_back(
        {{"msg_type", d.msg_type}, {"bytes", d.bytes}, {"mime_types", d.mime_types}});
  return {{"stdout_bytes", stdout_bytes_},
          {"stderr_bytes", stderr_bytes_},
          {"displays", displays_},
          {"errors", errors_},
          {"last_displays", std::move(displays)}};
}

}  // namespace kwd::protocol
