#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "kwd/logging/json_sink.hpp"
#include "kwd/logging/log_fields.hpp"

using kwd::logging::JsonLineSink;
using kwd::logging::LogFields;

namespace {

nlohmann::json line_of(spdlog::level::level_enum level, std::string_view text) {
  const spdlog::details::log_msg msg("kernel-watchdog", level, text);
  const std::string line = JsonLineSink::format_line(msg);
  CHECK(line.find('\n') == std::string::npos);  // one record, one line
  return nlohmann::json::parse(line);
}

}  // namespace

TEST_CASE("JSON log line: time, level, pid, message, and the open fields") {
  const auto plain = line_of(spdlog::level::info, "daemon started");
  CHECK(plain["level"] == "info");
  CHECK(plain["message"] == "daemon started");
  CHECK(plain["pid"].is_number_integer());
  const std::string time = plain["time"];
  CHECK(time.size() == 24);  // 2026-11-25T07:01:02.123Z
  CHECK(time[10] == 'T');
  CHECK(time.back() == 'Z');
  CHECK_FALSE(plain.contains("kernel_id"));
  {
    const LogFields kernel({{"kernel_id", "0f1e"}});
    {
      const LogFields report({{"cause", "oom_killed"}, {"report", "/r/x.json"}});
      const auto with_all = line_of(spdlog::level::warn, "kernel died\nsecond line");
      CHECK(with_all["level"] == "warning");
      CHECK(with_all["message"] == "kernel died\nsecond line");
      CHECK(with_all["kernel_id"] == "0f1e");
      CHECK(with_all["cause"] == "oom_killed");
      CHECK(with_all["report"] == "/r/x.json");
    }
    const auto outer_only = line_of(spdlog::level::info, "x");
    CHECK(outer_only["kernel_id"] == "0f1e");
    CHECK_FALSE(outer_only.contains("cause"));
  }
  CHECK(LogFields::current().empty());
}

TEST_CASE("JSON log line: bytes that are not UTF-8 are replaced, the line is kept") {
  const std::string text = std::string("bad \xff\xfe") + " byte";
  const auto line = line_of(spdlog::level::err, text);
  const std::string message = line["message"];
  CHECK(message.starts_with("bad "));
  CHECK(message.ends_with(" byte"));
  CHECK(message.find("\xEF\xBF\xBD") != std::string::npos);  // U+FFFD
}

TEST_CASE("Log fields: a name given again in an inner scope has one value, the inner one") {
  const LogFields outer({{"kernel_id", "outer"}, {"cause", "x"}});
  const LogFields inner({{"kernel_id", "inner"}});
  const auto fields = LogFields::current();
  REQUIRE(fields.size() == 2);
  CHECK(fields[0] == LogFields::Field{"kernel_id", "inner"});
  CHECK(fields[1] == LogFields::Field{"cause", "x"});
}
