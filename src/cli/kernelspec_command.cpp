#include <cstdio>
#include <iostream>
#include <memory>

#include "kwd/cli/commands.hpp"
#include "kwd/kernelspec/kernelspec.hpp"
#include "kwd/platform/host.hpp"
#include "kwd/util/self_exe.hpp"

namespace kwd::cli {

Command add_kernelspec_command(CLI::App& app) {
  auto* ks = app.add_subcommand("kernelspec", "Put Jupyter kernels under watch");
  ks->require_subcommand(1);

  auto request = std::make_shared<kernelspec::WrapRequest>();
  auto user = std::make_shared<bool>(false);
  auto sys_prefix = std::make_shared<bool>(false);
  auto prefix = std::make_shared<std::string>();
  auto* wrap = ks->add_subcommand(
      "wrap",
      "Create a watched copy of an installed kernelspec. Front ends list it as a new kernel\n"
      "(\"<name>-watchdog\" unless --name says otherwise); the original stays as it is.");
  wrap->add_option("name", request->source_name, "The kernelspec to wrap (see `kernelspec list`)")
      ->required();
  wrap->add_option("--name", request->new_name, "Name of the new kernelspec");
  wrap->add_option("--display-name", request->display_name, "What front ends show");
  auto* user_flag = wrap->add_flag("--user", *user, "Install for this user (the default)");
  auto* sys_flag = wrap->add_flag("--sys-prefix", *sys_prefix,
                                  "Install into the active environment (virtualenv/conda)");
  auto* prefix_opt =
      wrap->add_option("--prefix", *prefix, "Install into PREFIX/share/jupyter/kernels");
  user_flag->excludes(sys_flag)->excludes(prefix_opt);
  sys_flag->excludes(prefix_opt);
  wrap->add_option("--run-option", request->extra_run_options,
                   "An option for `kernel-watchdog run` in the wrapped argv (repeatable), "
                   "e.g. --run-option=--report-dir=/data/reports");

  auto unwrap_name = std::make_shared<std::string>();
  auto* unwrap = ks->add_subcommand("unwrap", "Remove a kernelspec that `wrap` created");
  unwrap->add_option("name", *unwrap_name, "The wrapped kernelspec")->required();

  auto* list = ks->add_subcommand("list", "Installed kernelspecs, and which are under watch");

  return {
      ks, [=]() -> int {
        try {
          if (wrap->parsed()) {
            request->destination = !prefix->empty() ? kernelspec::Destination::kPrefix
                                   : *sys_prefix    ? kernelspec::Destination::kSysPrefix
                                                    : kernelspec::Destination::kUser;
            request->prefix = *prefix;
            request->watchdog_path = platform::self_executable();
            const auto dir = kernelspec::wrap(*request);
            std::cout << "Wrapped '" << request->source_name << "' into " << dir.string() << "\n";
            return 0;
          }
          if (unwrap->parsed()) {
            std::cout << "Removed " << kernelspec::unwrap(*unwrap_name).string() << "\n";
            return 0;
          }
          if (list->parsed()) {
            const auto all = kernelspec::find_all();
            if (all.empty()) std::cout << "No kernelspecs found on the Jupyter path.\n";
            for (const auto& k : all) {
              std::printf("%-24s %-9s %-32s %s\n", k.name.c_str(), k.wrapped() ? "watched" : "-",
                          k.spec.value("display_name", "").c_str(), k.dir.c_str());
            }
            return 0;
          }
        } catch (const kernelspec::KernelspecError& e) {
          std::cerr << "kernel-watchdog: " << e.what() << "\n";
          return 1;
        }
        return 2;
      }};
}

}  // namespace kwd::cli
