#include <catch2/catch.hpp>
#include <string>

#include "kwd/smoke/notebook.hpp"

using kwd::smoke::NotebookError;
using kwd::smoke::parse_notebook;

TEST_CASE("a notebook's cells, tags and execution metadata are read as smoke runs them") {
  const auto nb = parse_notebook(R"({"nbformat": 4, "nbformat_minor": 5,
    "metadata": {"kernelspec": {"name": "python3"}, "execution": {"timeout": 30}},
    "cells": [{"cell_type": "markdown", "source": "# t", "metadata": {}},
              {"cell_type": "code", "source": ["\n", "x = 1\n", "y = 2"], "outputs": [],
               "metadata": {"tags": ["raises-exception"]}}]})",
                                 "/nb/t.ipynb");
  REQUIRE(nb.code_cells.size() == 1);
  CHECK(nb.code_cells[0].source == "\nx = 1\ny = 2");
  CHECK(nb.code_cells[0].first_line() == "x = 1");
  CHECK(nb.code_cells[0].tagged("raises-exception"));
  CHECK(nb.kernel_name == "python3");
  CHECK(nb.timeout_s == 30.0);
}

// Found by tests/fuzz/fuzz_notebook.cpp: a number too big for a double made nlohmann throw
// out_of_range, not parse_error, and it escaped the loader (smoke would have died of it). Its
// reproducer is tests/fuzz/corpus/notebook/crash_number_overflow.ipynb.
TEST_CASE("a notebook holding a number too big for a double is refused, not a crash") {
  try {
    parse_notebook(R"({"nbformat": 4, "cells": [], "x": 5e0000000000537})", "/nb/big.ipynb");
    FAIL("no error");
  } catch (const NotebookError& e) {
    CHECK_THAT(e.what(), Catch::Contains("/nb/big.ipynb") && Catch::Contains("not valid JSON"));
  }
}

// Found by tests/fuzz/fuzz_notebook.cpp (a 10 M run): an nbformat 3 cell whose cell_type is an
// object made the upgrade throw type_error (tests/fuzz/corpus/notebook/
// crash_v3_cell_type_object.ipynb). Fields are read by their type; the cell is a raw one.
TEST_CASE("an nbformat 3 notebook with fields of the wrong type is upgraded, not a crash") {
  const auto nb = parse_notebook(R"({"nbformat": 3, "nbformat_minor": 0, "metadata": {},
    "worksheets": [{"cells": [{"cell_type": "code", "input": "x = 1", "metadata": []},
                              {"cell_type": {}}, {"cell_type": "heading", "level": "two"}]}]})",
                                 "/nb/v3.ipynb");
  REQUIRE(nb.code_cells.size() == 1);
  CHECK(nb.code_cells[0].source == "x = 1");
  CHECK(nb.document["cells"][1]["cell_type"] == "raw");
  CHECK(nb.document["cells"][2]["source"] == "# ");
}
