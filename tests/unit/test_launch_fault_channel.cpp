// The faulthandler pipe's text and the shim's cell announcements (on a pipe of their own, read
// in batches) are told apart however the reads cut them.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "kwd/launch/fault_channel.hpp"

using kwd::launch::CellAnnouncement;
using kwd::launch::FaultChannel;

TEST_CASE("records and faulthandler's text are told apart, at any read boundary") {
  const std::string stream =
      "\x1ekwd-cell {\"n\": 1, \"code\": \"x = 1\", \"truncated\": false}\n"
      "\x1ekwd-cell {\"n\": 2, \"code\": \"import ctypes\\nctypes.string_at(0)\", "
      "\"truncated\": true, \"t\": 1795840000123}\n"
      "Fatal Python error: Segmentation fault\n\nCurrent thread 0x1 (most recent call first):\n"
      "\x1enot a record\n"
      "  File \"<cell>\", line 2 in <module>\n";
  for (std::size_t chunk : {1u, 3u, 17u, 4096u}) {
    FaultChannel channel(1 << 20);
    std::vector<CellAnnouncement> cells;
    for (std::size_t i = 0; i < stream.size(); i += chunk)
      channel.feed(std::string_view(stream).substr(i, chunk),
                   [&](CellAnnouncement c) { cells.push_back(std::move(c)); });
    INFO("chunk " << chunk);
    REQUIRE(cells.size() == 2);
    CHECK(cells[0].execution_count == 1);
    CHECK(cells[1].code == "import ctypes\nctypes.string_at(0)");
    CHECK(cells[1].truncated);
    // The cell's start, by the kernel's clock; 0 from a record that does not say.
    CHECK(cells[0].at_ms == 0);
    CHECK(cells[1].at_ms == 1795840000123);
    CHECK(channel.take_text() ==
          "Fatal Python error: Segmentation fault\n\nCurrent thread 0x1 (most recent call "
          "first):\n\x1enot a record\n  File \"<cell>\", line 2 in <module>\n");
  }
}

TEST_CASE("a record cut short by the death is kept as text; the text is capped") {
  FaultChannel channel(32);
  int cells = 0;
  channel.feed("\x1ekwd-cell {\"n\": 3, \"co", [&](CellAnnouncement) { ++cells; });
  CHECK_FALSE(channel.has_text());
  CHECK(channel.take_text() == "\x1ekwd-cell {\"n\": 3, \"co");
  channel.feed(std::string(100, 'x'), [&](CellAnnouncement) { ++cells; });
  CHECK(channel.take_text().size() == 32);
  CHECK(cells == 0);
}

TEST_CASE("the shim's first record says it runs, and is neither a cell nor text") {
  FaultChannel channel(1 << 10);
  int cells = 0;
  CHECK_FALSE(channel.shim_started());
  channel.feed("\x1ekwd-shim {}\n\x1ekwd-cell {\"n\": 1, \"code\": \"x\"}\n",
               [&](CellAnnouncement) { ++cells; });
  CHECK(channel.shim_started());
  CHECK_FALSE(channel.announces_cells());  // not an IPython kernel yet
  CHECK(cells == 1);
  // Forged by the kernel's own code: read as no, never thrown from.
  channel.feed("\x1ekwd-shim {\"cells\": 1}\n\x1ekwd-shim [true]\n\x1ekwd-shim {\n",
               [&](CellAnnouncement) { ++cells; });
  CHECK_FALSE(channel.announces_cells());
  channel.feed("\x1ekwd-shim {\"cells\": true}\n", [&](CellAnnouncement) { ++cells; });
  CHECK(channel.announces_cells());
  CHECK_FALSE(channel.has_text());
}
