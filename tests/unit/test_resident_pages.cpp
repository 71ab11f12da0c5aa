#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "kwd/platform/resident_pages.hpp"

#ifdef __linux__
namespace {

// Resident KiB of file-backed pages (RssFile), from /proc/self/status.
long resident_file_kb() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("RssFile:")) return std::stol(line.substr(8));
  return -1;
}

int written_global = 0;                                        // .bss, written below
const char* const kReadOnlyTable[] = {"one", "two", "three"};  // relocated pointers (RELRO)

}  // namespace
#endif

TEST_CASE("unwritten file pages leave the RSS, and everything still runs") {
#ifdef __linux__
  written_global = 42;
  const nlohmann::json before = {{"n", 1}, {"list", {1, 2, 3}}};
  const std::string text_before = before.dump(2);
  const long file_kb = resident_file_kb();
  REQUIRE(file_kb > 0);
  const std::size_t released = kwd::platform::release_unwritten_file_pages();
  CHECK(released > 0);
  // Code and read-only data come back as they are used; what this process wrote was kept.
  CHECK(written_global == 42);
  CHECK(std::string(kReadOnlyTable[2]) == "three");
  CHECK(nlohmann::json::parse(text_before) == before);
  CHECK(nlohmann::json::parse(text_before).dump(2) == text_before);
  INFO("RssFile before " << file_kb << " KiB, released " << released / 1024 << " KiB");
  CHECK(resident_file_kb() < file_kb);
#else
  CHECK(kwd::platform::release_unwritten_file_pages() == 0);
#endif
}
