#include "kwd/protocol/json_frame_reader.hpp"

#include <simdjson.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

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
  std::vector<char> padded;  // simdjson reads up to SIMDJSON_PADDING bytes past the end

  // The frame's root object, or an error.
  simdjson::simdjson_result<simdjson::dom::object> parse(std::string_view frame) {
    if (padded.size() < frame.size() + simdjson::SIMDJSON_PADDING)
      padded.resize(frame.size() + simdjson::SIMDJSON_PADDING);
    std::memcpy(padded.data(), frame.data(), frame.size());
    std::memset(padded.data() + frame.size(), 0, simdjson::SIMDJSON_PADDING);
    if (parser.capacity() > kKeepCapacity && frame.size() <= kKeepCapacity) {
      if (parser.allocate(kKeepCapacity) != simdjson::SUCCESS) return simdjson::MEMALLOC;
    }
    if (padded.size() > kKeepCapacity + simdjson::SIMDJSON_PADDING &&
        frame.size() <= kKeepCapacity) {
      padded.resize(kKeepCapacity + simdjson::SIMDJSON_PADDING);
      padded.shrink_to_fit();
    }
    return parser.parse(padded.data(), frame.size(), /*realloc_if_needed=*/false).get_object();
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
