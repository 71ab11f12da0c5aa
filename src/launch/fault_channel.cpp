#include "kwd/launch/fault_channel.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace kwd::launch {
namespace {

constexpr char kRecordStart = '\x1e';
constexpr std::string_view kCellTag = "kwd-cell ";
constexpr std::string_view kShimStartedTag = "kwd-shim ";
// The shim writes at most 4000 bytes a record; anything longer without its newline is not one.
constexpr std::size_t kMaxRecord = 8192;

}  // namespace

void FaultChannel::keep_text(std::string_view bytes) {
  if (text_.size() < text_limit_) text_.append(bytes.substr(0, text_limit_ - text_.size()));
}

bool FaultChannel::parse(std::string_view record, CellAnnouncement& out) {
  if (!record.starts_with(kCellTag)) return false;
  record.remove_prefix(kCellTag.size());
  const auto doc = nlohmann::json::parse(record, nullptr, false);
  if (!doc.is_object()) return false;
  const auto n = doc.find("n");
  const auto code = doc.find("code");
  if (n == doc.end() || !n->is_number_integer() || code == doc.end() || !code->is_string())
    return false;
  out.execution_count = n->get<std::int64_t>();
  out.code = code->get<std::string>();
  const auto truncated = doc.find("truncated");
  out.truncated = truncated != doc.end() && truncated->is_boolean() && truncated->get<bool>();
  const auto at = doc.find("t");
  out.at_ms = at != doc.end() && at->is_number_integer() ? at->get<std::int64_t>() : 0;
  return true;
}

void FaultChannel::feed(std::string_view bytes, const OnCell& on_cell) {
  pending_.append(bytes);
  std::string_view rest = pending_;
  for (;;) {
    const auto start = rest.find(kRecordStart);
    keep_text(rest.substr(0, start));
    if (start == std::string_view::npos) {
      rest = {};
      break;
    }
    rest.remove_prefix(start);
    const auto end = rest.find('\n');
    if (end == std::string_view::npos) {
      if (rest.size() > kMaxRecord) {  // not a record after all
        keep_text(rest);
        rest = {};
      }
      break;
    }
    CellAnnouncement cell;
    const auto record = rest.substr(1, end - 1);
    if (record.starts_with(kShimStartedTag)) {
      shim_started_ = true;
      const auto said =
          nlohmann::json::parse(record.substr(kShimStartedTag.size()), nullptr, false);
      // The kernel's own code can write here too: a "cells" that is not a boolean is no.
      if (const auto cells = said.is_object() ? said.find("cells") : said.end();
          cells != said.end() && cells->is_boolean() && cells->get<bool>())
        announces_cells_ = true;
    } else if (parse(record, cell))
      on_cell(std::move(cell));
    else
      keep_text(rest.substr(0, end + 1));
    rest.remove_prefix(end + 1);
  }
  pending_.erase(0, pending_.size() - rest.size());
}

std::string FaultChannel::take_text() {
  keep_text(pending_);
  pending_.clear();
  std::string out = std::move(text_);
  text_.clear();
  return out;
}

}  // namespace kwd::launch
