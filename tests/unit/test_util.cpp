#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cctype>
#include <chrono>
#include <cmath>
#include <csignal>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "kwd/util/byte_ring.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/json_text.hpp"
#include "kwd/util/private_files.hpp"
#include "kwd/util/process_exists.hpp"
#include "kwd/util/signal_name.hpp"
#include "kwd/util/size_parse.hpp"

namespace fs = std::filesystem;
using namespace kwd::util;

TEST_CASE("ByteRing keeps the newest bytes, oldest first") {
  ByteRing ring(8);
  ring.append("abc");
  CHECK(ring.contents() == "abc");
  ring.append("defgh");
  CHECK(ring.contents() == "abcdefgh");
  ring.append("ij");
  CHECK(ring.contents() == "cdefghij");
  CHECK(ring.total_bytes() == 10);
  ring.append("0123456789xyz");
  CHECK(ring.contents() == "56789xyz");
  CHECK(ring.size() == 8);
}

TEST_CASE("ByteRing says when each retained stretch of bytes arrived") {
  ByteRing ring(16);
  CHECK(ring.arrival_times().empty());
  ring.append("one\n", 1000);
  ring.append("two\n", 1002);  // within the coalescing window: same entry
  ring.append("three\n", 2000);
  using Times = std::vector<std::pair<std::size_t, std::int64_t>>;
  CHECK(ring.contents() == "one\ntwo\nthree\n");
  CHECK(ring.arrival_times() == Times{{0, 1000}, {8, 2000}});
  ring.append("four\n", 3000);  // overwrites "one": the first entry now starts mid-way
  CHECK(ring.contents() == "\ntwo\nthree\nfour\n");
  CHECK(ring.arrival_times() == Times{{0, 1000}, {5, 2000}, {11, 3000}});
  ring.append("0123456789abcdef", 4000);  // everything before is gone
  CHECK(ring.arrival_times() == Times{{0, 4000}});
  ring.append("xy");  // no time: the bytes share the last one
  CHECK(ring.arrival_times() == Times{{0, 4000}});
}

TEST_CASE("parse_size understands the sizes people type") {
  CHECK(parse_size("4096") == 4096u);
  CHECK(parse_size("256K") == 256u * 1024);
  CHECK(parse_size("300M") == 300u * 1024 * 1024);
  CHECK(parse_size("300MiB") == 300u * 1024 * 1024);
  CHECK(parse_size("1.5G") == static_cast<std::uint64_t>(1.5 * 1024 * 1024 * 1024));
  CHECK(parse_size("2gb") == 2ull * 1024 * 1024 * 1024);
  CHECK_FALSE(parse_size(""));
  CHECK_FALSE(parse_size("lots"));
  CHECK_FALSE(parse_size("-1M"));
  CHECK_FALSE(parse_size("10X"));
  CHECK(format_bytes(3.0 * 1024 * 1024 * 1024) == "3.0 GiB");
  CHECK(format_bytes(512) == "512 B");
}

namespace {
fs::path fresh_dir(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("kwd-unit-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(dir);
  return dir;
}
}  // namespace

TEST_CASE("SafeDir::open_private creates 0700 directories and refuses non-directories") {
  const auto base = fresh_dir("private");
  const auto dir = SafeDir::open_private(base / "a" / "b");
  CHECK(dir.path() == fs::weakly_canonical(base / "a" / "b"));
  struct stat st {};
  REQUIRE(::stat((base / "a" / "b").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  fs::permissions(base / "a" / "b", fs::perms::owner_all | fs::perms::group_read);
  SafeDir::open_private(base / "a" / "b");
  REQUIRE(::stat((base / "a" / "b").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);  // made private again
  std::ofstream(base / "file") << "x";
  CHECK_THROWS_AS(SafeDir::open_private(base / "file"), FileError);
  CHECK_THROWS_AS(SafeDir::open_private(base / "file" / "sub"), FileError);
  CHECK_THROWS_AS(SafeDir::open_private("relative/dir"), FileError);
  fs::remove_all(base);
}

TEST_CASE("SafeDir refuses a path through a directory others may change") {
  const auto base = fresh_dir("unsafe");
  SafeDir::open_private(base);
  fs::create_directory(base / "open");
  fs::permissions(base / "open", fs::perms::all);  // 0777, not sticky
  try {
    SafeDir::open_private(base / "open" / "mine");
    FAIL("a directory writable by others was accepted");
  } catch (const FileError& e) {
    CHECK_THAT(e.what(), Catch::Contains("writable by others"));
  }
  CHECK_FALSE(fs::exists(base / "open" / "mine"));
  // Sticky, as /tmp is: others cannot rename what is ours in it.
  fs::permissions(base / "open", fs::perms::all | fs::perms::sticky_bit);
  CHECK_NOTHROW(SafeDir::open_private(base / "open" / "mine"));
  // A link on the way is resolved once up front; one the walk meets is refused.
  fs::create_directory_symlink(base / "open", base / "link");
  CHECK(SafeDir::open(base / "link").path() == fs::weakly_canonical(base / "open"));
  fs::remove_all(base);
}

TEST_CASE("SafeDir follows only links that root or we own") {
  const auto base = fresh_dir("links");
  SafeDir::open_private(base / "real" / "inner");
  // Ours, relative, and a chain of two: followed as the kernel would.
  fs::create_directory_symlink("real", base / "relative");
  fs::create_directory_symlink(base / "relative", base / "chain");
  const auto real = fs::weakly_canonical(base / "real");
  CHECK(SafeDir::open(base / "relative" / "inner").path() == real / "inner");
  CHECK(SafeDir::open_private(base / "chain" / "inner" / "new").path() == real / "inner" / "new");
  fs::create_directory_symlink("loop", base / "loop");
  CHECK_THROWS_WITH(SafeDir::open(base / "loop"), Catch::Contains("too many symbolic links"));
  if (::geteuid() == 0) {
    // Another user's link where a private directory of ours would be made (/tmp's
    // kernel-watchdog-UID) would have us make one of our own directories 0700 and fill it.
    constexpr uid_t kNobody = 65534;
    fs::permissions(base / "real", fs::perms::owner_all);
    fs::create_directory_symlink(base / "real", base / "planted");
    REQUIRE(::lchown((base / "planted").c_str(), kNobody, kNobody) == 0);
    CHECK_THROWS_WITH(SafeDir::open_private(base / "planted" / "shim"),
                      Catch::Contains("symbolic link of another user's"));
    fs::create_directory_symlink(base / "planted", base / "ours-to-theirs");
    CHECK_THROWS_WITH(SafeDir::open(base / "ours-to-theirs"),
                      Catch::Contains("symbolic link of another user's"));
    CHECK_FALSE(fs::exists(base / "real" / "shim"));
  }
  fs::remove_all(base);
}

TEST_CASE("SafeDir writes contents made as they are written, and leaves nothing when they fail") {
  const auto base = fresh_dir("pieces");
  const auto dir = SafeDir::open_private(base);
  const auto path = dir.write_file(
      "n.ipynb",
      [](const kwd::util::WriteBytes& write) {
        for (int i = 0; i < 1000; ++i)
          write("piece " + std::to_string(i) + "\n");
      },
      0644);
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  CHECK(text.starts_with("piece 0\npiece 1\n"));
  CHECK(text.ends_with("piece 999\n"));
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0644);
  // A writer that fails half-way: its error comes out, the old file stays, no temporary.
  CHECK_THROWS_WITH(dir.write_file("n.ipynb",
                                   [](const kwd::util::WriteBytes& write) {
                                     write("half of it");
                                     throw std::runtime_error("cannot make the rest");
                                   }),
                    "cannot make the rest");
  // Nor when what it throws is a FileError of its own.
  CHECK_THROWS_AS(dir.write_file("n.ipynb",
                                 [](const kwd::util::WriteBytes& write) {
                                   write("a third");
                                   throw FileError("a file of the writer's own");
                                 }),
                  FileError);
  std::ifstream again(path);
  CHECK(std::string((std::istreambuf_iterator<char>(again)), {}) == text);
  int entries = 0;
  for (const auto& e : fs::directory_iterator(base)) {
    (void)e;
    ++entries;
  }
  CHECK(entries == 1);
  fs::remove_all(base);
}

TEST_CASE("SafeDir writes atomically, never replacing when told not to") {
  const auto base = fresh_dir("atomic");
  const auto dir = SafeDir::open_private(base);
  const auto path = dir.write_file("r.json", "{\"ok\": true}");
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  CHECK(text == "{\"ok\": true}");
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK_THROWS_AS(dir.write_file("r.json", "other", 0600, Replace::kNever), FileError);
  CHECK_NOTHROW(dir.write_file("r.json", "newer", 0600, Replace::kAllowed));
  int entries = 0;
  for (const auto& e : fs::directory_iterator(base)) {
    (void)e;
    ++entries;
  }
  CHECK(entries == 1);  // no temporary left by the refused write
  CHECK_THROWS_AS(write_file_atomically(base / "missing", "r.json", "x"), FileError);
  fs::remove_all(base);
}

TEST_CASE("SafeDir sweeps what dead writers and dead watchdogs left, and only that") {
  const auto base = fresh_dir("sweep");
  const auto dir = SafeDir::open_private(base);
  std::ofstream(base / ".tmp-999999999-abc") << "half";
  std::ofstream(base / (".tmp-" + std::to_string(::getpid()) + "-abc")) << "in progress";
  std::ofstream(base / "kept.json") << "{}";
  CHECK(dir.sweep_temporaries() == 1);
  CHECK_FALSE(fs::exists(base / ".tmp-999999999-abc"));
  CHECK(fs::exists(base / (".tmp-" + std::to_string(::getpid()) + "-abc")));
  CHECK(fs::exists(base / "kept.json"));

  fs::create_directories(base / "shim-999999999-x" / "__pycache__");
  std::ofstream(base / "shim-999999999-x" / "__pycache__" / "a.pyc") << "x";
  fs::create_directory_symlink(base / "kept-target", base / "shim-999999998-link");
  fs::create_directory(base / "kept-target");
  const std::string live = "shim-" + std::to_string(::getpid()) + "-y";
  fs::create_directory(base / live);
  CHECK(dir.sweep_dead_owners("shim-") == 1);
  CHECK_FALSE(fs::exists(base / "shim-999999999-x"));
  CHECK(fs::exists(base / live));
  CHECK(fs::exists(base / "kept-target"));  // a link is never followed
  CHECK(dir.remove_tree(live));
  CHECK_FALSE(fs::exists(base / live));
  fs::remove_all(base);
}

TEST_CASE("owners of swept things: the pid in a name, and whether it still exists") {
  CHECK(pid_after_prefix("pyshim-1234-Ab3xYz", "pyshim-") == 1234);
  CHECK(pid_after_prefix("kernel-watchdog-77", "kernel-watchdog-") == 77);
  CHECK_FALSE(pid_after_prefix("pyshim-", "pyshim-"));
  CHECK_FALSE(pid_after_prefix("pyshim-x1", "pyshim-"));
  CHECK_FALSE(pid_after_prefix("other-12", "pyshim-"));

  CHECK(process_exists(::getpid()));
  CHECK(process_exists(1));  // init: not ours to signal unless root, and it exists either way
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(0);
  REQUIRE(::waitpid(child, nullptr, 0) == child);
  CHECK_FALSE(process_exists(child));  // reaped: gone
}

TEST_CASE("SafeDir sweeps files of a prefix older than an age, and nothing else") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("kwd-age-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const auto safe = kwd::util::SafeDir::open_private(dir);
  safe.write_file("notice-old.json", "{}");
  safe.write_file("notice-new.json", "{}");
  safe.write_file("other-old.json", "{}");
  const auto long_ago = std::filesystem::file_time_type::clock::now() - std::chrono::hours(1);
  std::filesystem::last_write_time(dir / "notice-old.json", long_ago);
  std::filesystem::last_write_time(dir / "other-old.json", long_ago);
  CHECK(safe.sweep_older_than("notice-", 600) == 1);
  CHECK_FALSE(std::filesystem::exists(dir / "notice-old.json"));
  CHECK(std::filesystem::exists(dir / "notice-new.json"));
  CHECK(std::filesystem::exists(dir / "other-old.json"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("format_duration says a span as people do") {
  using kwd::util::format_duration;
  CHECK(format_duration(0.42) == "0.4 s");
  CHECK(format_duration(8.307) == "8.3 s");
  CHECK(format_duration(42.6) == "43 s");
  CHECK(format_duration(60) == "1 min");
  CHECK(format_duration(125.9) == "2 min 6 s");  // rounded, not cut
  CHECK(format_duration(3 * 3600 + 7 * 60 + 5) == "3 h 7 min");
  CHECK(format_duration(2 * 86400 + 4 * 3600) == "2 d 4 h");
  CHECK(format_duration(-5) == "-5.0 s");
  // Rounded to what is shown before the unit is chosen.
  CHECK(format_duration(9.97) == "10 s");
  CHECK(format_duration(59.97) == "1 min");
  CHECK(format_duration(-0.04) == "0.0 s");
  CHECK(format_duration(std::nan("")) == "?");
}

TEST_CASE("local_wall_time is the reader's time zone") {
  setenv("TZ", "UTC", 1);
  tzset();
  CHECK(kwd::util::local_wall_time(1'795'365'168'409) == "2026-11-22 16:32:48 UTC");
  setenv("TZ", "Europe/Berlin", 1);
  tzset();
  CHECK(kwd::util::local_wall_time(1'795'365'168'409) == "2026-11-22 17:32:48 CET");
  unsetenv("TZ");
  tzset();
}

TEST_CASE("json_text writes what dump() writes, byte for byte") {
  using nlohmann::json;
  std::vector<json> documents = {
      json::object(),
      json::array(),
      json{{"a", json::object()}, {"b", json::array()}, {"c", {json::array(), json::object()}}},
      json("plain"),
      json(std::string("quote \" backslash \\ slash / controls \b\f\n\r\t \x01\x1f\x7f end")),
      json(std::string("\x00 nul inside", 13)),
      json("unicode: é ✓ 😀, and a control \x02 after"),
      json{{"ints",
            {0, -1, 42, std::numeric_limits<std::int64_t>::min(),
             std::numeric_limits<std::int64_t>::max()}},
           {"unsigned", std::numeric_limits<std::uint64_t>::max()},
           {"floats", {0.1, -0.0, 1e300, 2.5e-310, 3.0, 123456.789}},
           {"flags", {true, false, nullptr}}},
      json{{"z", 1}, {"a", {{"nested", {{"deeper", {1, {2, {3}}}}}}}}, {"m", "x"}},
  };
  // Every report the fixtures hold: real documents of every shape the writers produce.
  for (const auto& dir : {"diagnosis", "gpu"})
    for (const auto& entry : std::filesystem::directory_iterator(
             std::filesystem::path(KWD_SOURCE_DIR) / "tests" / "fixtures" / dir)) {
      std::ifstream in(entry.path());
      documents.push_back(json::parse(in));
    }
  for (const auto& doc : documents)
    for (const int indent : {-1, 0, 1, 2, 4}) {
      INFO(doc.dump().substr(0, 200) << " indent " << indent);
      CHECK(kwd::util::json_text(doc, indent) == doc.dump(indent));
    }
  // Each byte that needs care at each place in strings either side of the 8- and 16-byte
  // steps the scan takes: the first, the last, and across a step's edge.
  for (const std::string_view special : {"\x01", "\"", "\\", "\x1f", "\n", "\x7f", " ", "é"})
    for (std::size_t length = 0; length <= 40; ++length)
      for (std::size_t at = 0; at <= length; ++at) {
        std::string text(length, 'x');
        if (length > 0) text.back() = length % 3 == 0 ? '\t' : 'y';
        text.insert(at, special);
        const json doc(text);
        INFO("length " << length << " at " << at);
        CHECK(kwd::util::json_text(doc, -1) == doc.dump(-1));
      }
  // Invalid UTF-8 is refused as dump() refuses it.
  const json broken = std::string("bad \xff byte");
  CHECK_THROWS_AS(kwd::util::json_text(broken, 1), json::type_error);
}

TEST_CASE("write_json_text hands on, in pieces, the text json_text makes") {
  using nlohmann::json;
  const std::string long_ascii = std::string(5000, 'x') + "\n\"quoted\"\t" + std::string(3000, 'y');
  const std::string long_unicode = std::string(4000, 'a') + "é ✓ 😀" + std::string(4000, 'b');
  const json doc = {{"cells",
                     {{{"text", json::array({long_ascii, "short", long_ascii})},
                       {"unicode", long_unicode},
                       {"n", 1.5},
                       {"empty", json::object()}}}},
                    {"tail", std::string(70, '\x01')}};
  for (const std::size_t piece :
       {std::size_t{64}, std::size_t{100}, std::size_t{4096}, std::size_t{1} << 20}) {
    for (const int indent : {-1, 1}) {
      INFO("piece " << piece << " indent " << indent);
      std::string joined;
      std::size_t pieces = 0, largest = 0;
      kwd::util::write_json_text(
          doc, indent,
          [&](std::string_view part) {
            joined += part;
            ++pieces;
            largest = std::max(largest, part.size());
          },
          piece);
      CHECK(joined == doc.dump(indent));
      if (piece < 4096) {
        CHECK(pieces > 10);
        // A long ASCII string goes in slices; one that is not ASCII is left to nlohmann whole.
        CHECK(largest < long_unicode.size() + 2 * piece + 64);
      }
      if (piece == 100) CHECK(pieces >= long_ascii.size() / piece);  // sliced, not whole
    }
  }
  // Invalid UTF-8 throws, as json_text does; what was handed on before is the caller's.
  CHECK_THROWS_AS(
      kwd::util::write_json_text(
          json::array({std::string(200, 'z'), "bad \xff"}), 1, [](std::string_view) {}, 64),
      json::type_error);
}

TEST_CASE("json_text leaves binary values to nlohmann's own layout") {
  const nlohmann::json doc = {{"blob", nlohmann::json::binary({1, 2, 3})}, {"n", 1}};
  for (const int indent : {-1, 1, 2})
    CHECK(kwd::util::json_text(doc, indent) == doc.dump(indent));
}

TEST_CASE("random names are the length asked, from the alphabet, evenly spread and distinct") {
  CHECK(random_name(0).empty());
  const std::string key = random_name(48);
  CHECK(key.size() == 48);
  CHECK(random_name(48) != key);
  // 62 000 characters: each of the 62 expected 1000 times, standard deviation ~31. The
  // bounds are 5.4 of those (a false alarm about once in 250 000 runs), while byte % 62 over
  // all 256 byte values would put the first eight characters at ~1210.
  std::map<char, int> seen;
  for (int i = 0; i < 1000; ++i)
    for (const char c : random_name(62))
      ++seen[c];
  CHECK(seen.size() == 62);
  for (const auto& [c, count] : seen) {
    INFO(c);
    CHECK(std::isalnum(static_cast<unsigned char>(c)));
    CHECK(count > 830);
    CHECK(count < 1170);
  }
}

TEST_CASE("signal names are the platform's; a number it does not name has none") {
  CHECK(kwd::util::signal_name(SIGSEGV) == "SIGSEGV");
  CHECK(kwd::util::signal_name(SIGABRT) == "SIGABRT");
  CHECK(kwd::util::signal_name(SIGKILL) == "SIGKILL");
#ifdef SIGRTMIN
  // The real-time signals have numbers, not names ("SIGRTMIN+6" is a sum, not a name).
  CHECK_FALSE(kwd::util::signal_name(SIGRTMIN + 6).has_value());
#endif
  CHECK_FALSE(kwd::util::signal_name(0).has_value());
  CHECK_FALSE(kwd::util::signal_name(4242).has_value());
}
