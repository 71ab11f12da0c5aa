#include <catch2/catch.hpp>

#include "kwd/cli/did_you_mean.hpp"

using kwd::cli::edit_distance;
using kwd::cli::find_command_typo;

namespace {

// The shape of kernel-watchdog's own command tree.
struct CommandTree {
  CLI::App app{"test", "kernel-watchdog"};
  CommandTree() {
    app.require_subcommand(1);
    app.add_subcommand("run");
    auto* reports = app.add_subcommand("reports");
    reports->require_subcommand(1);
    reports->add_subcommand("list");
    reports->add_subcommand("show");
    reports->add_subcommand("html");
    auto* kernelspec = app.add_subcommand("kernelspec");
    kernelspec->require_subcommand(1);
    kernelspec->add_subcommand("wrap");
    kernelspec->add_subcommand("unwrap");
    kernelspec->add_subcommand("list");
    app.add_subcommand("status");
    app.add_subcommand("smoke");
  }
  std::optional<std::string> nearest(std::vector<std::string> args) {
    const auto typo = find_command_typo(app, args, {"--log-level"});
    return typo ? typo->meant : std::nullopt;
  }
  std::optional<std::string> unknown(std::vector<std::string> args) {
    const auto typo = find_command_typo(app, args, {"--log-level"});
    return typo ? std::optional(typo->word) : std::nullopt;
  }
};

}  // namespace

TEST_CASE("edit distance counts inserts, deletes, replacements and swaps") {
  CHECK(edit_distance("report", "reports") == 1);
  CHECK(edit_distance("shwo", "show") == 1);
  CHECK(edit_distance("", "list") == 4);
  CHECK(edit_distance("kernlspec", "kernelspec") == 1);
  CHECK(edit_distance("status", "status") == 0);
}

TEST_CASE("a mistyped command is answered with the command line that was meant") {
  CommandTree t;
  CHECK(t.nearest({"report", "list"}) == "reports list");
  CHECK(t.nearest({"report"}) == "reports list");
  CHECK(t.nearest({"reports", "shwo", "latest"}) == "reports show latest");
  CHECK(t.nearest({"--log-level", "debug", "stauts"}) == "status");
  CHECK(t.nearest({"rn", "--", "python3", "-m", "ipykernel"}) == "run -- python3 -m ipykernel");
  CHECK(t.nearest({"kernelspecs", "wrap", "python3"}) == "kernelspec wrap python3");
}

TEST_CASE("known commands and far-off words get no suggestion") {
  CommandTree t;
  CHECK_FALSE(t.unknown({"reports", "list"}));
  CHECK_FALSE(t.unknown({"run", "--", "reprots"}));
  CHECK_FALSE(t.unknown({}));
  CHECK(t.unknown({"launch-the-rockets"}) == "launch-the-rockets");
  CHECK_FALSE(t.nearest({"launch-the-rockets"}));
  CHECK(t.unknown({"reports", "frobnicate"}) == "frobnicate");
  CHECK_FALSE(t.nearest({"reports", "frobnicate"}));
  CHECK(t.unknown({"report", "list"}) == "report");
}
