#include "kwd/protocol/json_frame_reader.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>

namespace kwd::protocol {
namespace {

using nlohmann::json;

// A parser sized for one huge frame keeps that memory: give it back past this.
constexpr std::size_t kKeepCapacity = 1u << 20;

json to_json(simdjson::dom::element e);

json object_to_json(simdjson::dom::object o) {
  json object = json::object();
  // operator[]: a repeated key keeps its last value, as nlohmann's own parser does.
  for (const auto field : o)
    object[std::string(field.key)] = to_json(field.value);
  return object;
}

json to_json(simdjson::dom::element e) {
  using simdjson::dom::element_type;
  switch (e.type()) {
    case element_type::OBJECT:
      return object_to_json(simdjson::dom::object(e));
    case element_type::ARRAY: {
      json array = json::array();
      for (const auto item : simdjson::dom::array(e))
        array.push_back(to_json(item));
      return array;
    }
    case element_type::STRING:
      return std::string(std::string_view(e));
    case element_type::INT64:
      return std::int64_t(e);
    case element_type::UINT64:
      return std::uint64_t(e);
    case element_type::DOUBLE:
      return double(e);
    case element_type::BOOL:
      return bool(e);
    case element_type::NULL_VALUE:
      return nullptr;
  }
  return nullptr;
}

}  // namespace

struct JsonFrameReader::Impl {
  simdjson::dom::parser parser;
  // The frame, copied with room after it: simdjson reads up to SIMDJSON_PADDING bytes past
  // the end. Not zero-filled when it grows, as a vector would be: every byte used is copied in.
  std::unique_ptr<char[]> padded;
  std::size_t padded_size = 0;

  // The frame's root object, or an error.
  simdjson::simdjson_result<simdjson::dom::object> parse(std::string_view frame) {
    const std::size_t needed = frame.size() + simdjson::SIMDJSON_PADDING;
    if (needed > padded_size) {
      padded.reset();
      padded_size = 0;  // until the new buffer exists: a bad_alloc must not leave a stale size
      padded = std::make_unique_for_overwrite<char[]>(needed);
      padded_size = needed;
    }
    std::memcpy(padded.get(), frame.data(), frame.size());
    std::memset(padded.get() + frame.size(), 0, simdjson::SIMDJSON_PADDING);
    if (parser.capacity() > kKeepCapacity && frame.size() <= kKeepCapacity) {
      if (parser.allocate(kKeepCapacity) != simdjson::SUCCESS) return simdjson::MEMALLOC;
    }
    auto root = parser.parse(padded.get(), frame.size(), /*realloc_if_needed=*/false).get_object();
    // The document holds its own copies of the strings, so a copy made for one huge frame goes
    // at once: the strings taken out of the document next can have its memory, already
    // paged in, rather than as much again fresh from the system.
    if (padded_size > kKeepCapacity + simdjson::SIMDJSON_PADDING) {
      padded.reset();
      padded_size = 0;
    }
    return root;
  }
};

JsonFrameReader::JsonFrameReader() : impl_(std::make_unique<Impl>()) {}
JsonFrameReader::~JsonFrameReader() = default;
JsonFrameReader::JsonFrameReader(JsonFrameReader&&) noexcept = default;
JsonFrameReader& JsonFrameReader::operator=(JsonFrameReader&&) noexcept = default;

bool JsonFrameReader::read_header(std::string_view frame, std::string* msg_id,
                                  std::string* msg_type, std::string* date) {
  simdjson::dom::object root;
  if (impl_->parse(frame).get(root) != simdjson::SUCCESS) return false;
  for (const auto field : root) {
    std::string* target = nullptr;
    if (msg_id != nullptr && field.key == "msg_id") target = msg_id;
    if (msg_type != nullptr && field.key == "msg_type") target = msg_type;
    if (date != nullptr && field.key == "date") target = date;
    std::string_view value;
    if (target != nullptr && field.value.get(value) == simdjson::SUCCESS) target->assign(value);
  }
  return true;
}

bool JsonFrameReader::read_object(std::string_view frame, json& out) {
  simdjson::dom::object root;
  if (impl_->parse(frame).get(root) != simdjson::SUCCESS) return false;
  out = object_to_json(root);
  return true;
}

}  // namespace kwd::protocol
