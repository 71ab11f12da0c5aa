#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "kwd/protocol/json_frame_reader.hpp"

using kwd::protocol::JsonFrameReader;
using nlohmann::json;

TEST_CASE("frames are read into the same document nlohmann would build") {
  JsonFrameReader reader;
  const std::string text =
      R"({"code": "print(\"caf\u00e9\")\n\ttab", "execution_count": 12, "n": -3, "big": 18446744073709551615,
          "f": 1.5e3, "t": true, "nil": null, "list": [1, "two", {"three": [3]}], "dup": 1, "dup": 2})";
  json ours;
  REQUIRE(reader.read_object(text, ours));
  const json reference = json::parse(text);
  CHECK(ours == reference);
  CHECK(ours["code"] == "print(\"caf\xc3\xa9\")\n\ttab");
  CHECK(ours["dup"] == 2);  // the last of a repeated key, as nlohmann keeps it
  CHECK(ours["big"].get<std::uint64_t>() == 18446744073709551615ull);
}

TEST_CASE("anything but one whole valid JSON object is refused") {
  JsonFrameReader reader;
  json out;
  for (const std::string bad : {"", " ", "{", "}", "[]", "42", "\"s\"", "null", "{} {}",
                                "{\"a\": 1,}", "{'a': 1}", "{\"a\": tru}", "{\"a\": \"\xff\xfe\"}",
                                "{\"a\": \"\\ud800\"}", "{\"a\": 01}", "{\"a\" 1}"}) {
    INFO(bad);
    CHECK_FALSE(reader.read_object(bad, out));
    std::string id = "kept", type;
    CHECK_FALSE(reader.read_header(bad, &id, &type));
  }
  // Deeply nested but valid is fine; past simdjson's depth limit it is refused.
  std::string deep = "{\"a\": " + std::string(500, '[') + std::string(500, ']') + "}";
  CHECK(reader.read_object(deep, out));
  std::string too_deep = "{\"a\": " + std::string(5000, '[') + std::string(5000, ']') + "}";
  CHECK_FALSE(reader.read_object(too_deep, out));
}

TEST_CASE("headers give their top-level msg_id and msg_type only") {
  JsonFrameReader reader;
  std::string id, type;
  REQUIRE(reader.read_header(
      R"({"msg_type": "stream", "x": {"msg_id": "nested"}, "msg_id": "m-1"})", &id, &type));
  CHECK(id == "m-1");
  CHECK(type == "stream");
  id.clear();
  type.clear();
  REQUIRE(reader.read_header(R"({"msg_id": 7, "msg_type": ["status"]})", &id, &type));
  CHECK(id.empty());  // not strings: not taken
  CHECK(type.empty());
  REQUIRE(reader.read_header("{}", nullptr, nullptr));
}

TEST_CASE("a huge frame does not stop small ones being read afterwards") {
  JsonFrameReader reader;
  json out;
  const std::string big = R"({"data": ")" + std::string(8u << 20, 'A') + R"("})";
  REQUIRE(reader.read_object(big, out));
  CHECK(out["data"].get_ref<const std::string&>().size() == 8u << 20);
  REQUIRE(reader.read_object(R"({"execution_state": "idle"})", out));
  CHECK(out == json{{"execution_state", "idle"}});
}
