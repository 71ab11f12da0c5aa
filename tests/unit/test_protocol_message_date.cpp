#include <catch2/catch.hpp>

#include "kwd/protocol/message_date.hpp"
#include "kwd/util/clock.hpp"

using kwd::protocol::parse_message_date_us;

TEST_CASE("header dates as jupyter_client and other kernels write them") {
  // 2026-01-01T00:00:01Z = 1767225601 s since the epoch.
  CHECK(parse_message_date_us("2026-01-01T00:00:01.000000Z") == 1767225601000000);
  CHECK(parse_message_date_us("2026-01-01T00:00:01.123456Z") == 1767225601123456);
  CHECK(parse_message_date_us("2026-01-01T00:00:01.5Z") == 1767225601500000);
  CHECK(parse_message_date_us("2026-01-01T00:00:01Z") == 1767225601000000);
  CHECK(parse_message_date_us("2026-01-01T00:00:01") == 1767225601000000);  // no zone: UTC
  CHECK(parse_message_date_us("2026-01-01 00:00:01.000+00:00") == 1767225601000000);
  CHECK(parse_message_date_us("2026-01-01T02:00:01.000+02:00") == 1767225601000000);
  CHECK(parse_message_date_us("2025-12-31T19:00:01-0500") == 1767225601000000);
  CHECK(parse_message_date_us("1970-01-01T00:00:00Z") == 0);
}

TEST_CASE("anything else is no date") {
  for (const char* bad :
       {"", "yesterday", "2026-13-01T00:00:00Z", "2026-02-30T00:00:00Z", "2026-01-01T24:00:00Z",
        "2026-01-01T00:00:00.Z", "2026-01-01", "2026-01-01T00:00:00Zjunk", "2026-01-01T00:00:00+5",
        "2026-01-01T-1:00:00Z", "2026-01-01T00:00:00+-1:00"}) {
    INFO(bad);
    CHECK_FALSE(parse_message_date_us(bad).has_value());
  }
}

TEST_CASE("digits past the microsecond are dropped; dates are written back as nbclient does") {
  CHECK(parse_message_date_us("2026-01-01T00:00:01.1234567Z") == 1767225601123456);
  CHECK(parse_message_date_us("2026-01-01T02:00:01.000001+02:00") == 1767225601000001);
  CHECK(kwd::util::iso8601_utc_us(1767225601123456) == "2026-01-01T00:00:01.123456Z");
  CHECK(kwd::util::iso8601_utc_us(1767225601000007) == "2026-01-01T00:00:01.000007Z");
}
