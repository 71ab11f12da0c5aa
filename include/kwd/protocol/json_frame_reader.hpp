#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

namespace kwd::protocol {

// Reads the JSON frames of a Jupyter message, validating each one whole (syntax, UTF-8),
// with simdjson: nlohmann's character-at-a-time lexer would be most of the cost of
// believing a message (bench/run_protocol_bench.py). Only what the watchdog uses is built:
// two strings of a header, and the content as an nlohmann document for the rest of the code.
class JsonFrameReader {
 public:
  JsonFrameReader();
  ~JsonFrameReader();
  JsonFrameReader(JsonFrameReader&&) noexcept;
  JsonFrameReader& operator=(JsonFrameReader&&) noexcept;

  // `frame` is one JSON object; its top-level "msg_id", "msg_type" and "date" strings, when
  // present and wanted (non-null), are copied out. False when it is not a valid JSON object.
  bool read_header(std::string_view frame, std::string* msg_id, std::string* msg_type,
                   std::string* date = nullptr);
  // `frame` is one valid JSON object; `out` becomes it. False otherwise (`out` unspecified).
  bool read_object(std::string_view frame, nlohmann::json& out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kwd::protocol
