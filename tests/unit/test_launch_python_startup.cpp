// Which kernel argv keeps the shim from running, read as CPython reads its own options.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "kwd/launch/python_startup.hpp"

using kwd::launch::shim_blocked_by;
using Argv = std::vector<std::string>;

TEST_CASE("the interpreter options I E and S before the module keep the shim out alone or grouped") {
  const Argv tail = {"-m", "ipykernel_launcher", "-f", "k.json"};
  auto with = [&](Argv head) {
    head.insert(head.end(), tail.begin(), tail.end());
    return shim_blocked_by(head);
  };
  CHECK_THAT(with({"/usr/bin/python3", "-I"}), Catch::Contains("(-I)"));
  CHECK_THAT(with({"python3.12", "-E"}), Catch::Contains("(-E)"));
  CHECK_THAT(with({"/opt/conda/bin/python", "-S"}), Catch::Contains("(-S)"));
  CHECK_THAT(with({"python", "-uBI"}), Catch::Contains("(-I)"));
  CHECK_THAT(with({"python", "-X", "frozen_modules=off", "-I"}), Catch::Contains("(-I)"));
  CHECK_THAT(with({"pypy3", "-E"}), Catch::Contains("(-E)"));
}

TEST_CASE("what the argv does not say is not guessed") {
  CHECK(shim_blocked_by({}).empty());
  CHECK(shim_blocked_by({"python3", "-m", "ipykernel_launcher", "-f", "k.json"}).empty());
  // -s (no user site) and -u still run site.py with PYTHONPATH.
  CHECK(shim_blocked_by({"python3", "-s", "-u", "-m", "ipykernel_launcher"}).empty());
  // The module's own options, and values of -X and -W, are not the interpreter's.
  CHECK(shim_blocked_by({"python3", "-m", "ipykernel_launcher", "-I"}).empty());
  CHECK(shim_blocked_by({"python3", "-X", "-I", "-m", "ipykernel_launcher"}).empty());
  CHECK(shim_blocked_by({"python3", "-Wignore", "-c", "import x", "-E"}).empty());
  CHECK(shim_blocked_by({"python3", "script.py", "-E"}).empty());
  // Not an interpreter by name: R, xeus-python's own program, a wrapper script.
  CHECK(shim_blocked_by({"R", "--slave", "-e", "IRkernel::main()", "-E"}).empty());
  CHECK(shim_blocked_by({"/usr/bin/env", "python3", "-I"}).empty());
}
