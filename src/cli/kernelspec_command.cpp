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
  ks->footer(
      "Example: kernel-watchdog kernelspec wrap python3   # then pick \"Python 3 (ipykernel) "
      "(watchdog)\" in Jupyter");
  ks->require_subcommand(1);

  auto request = std::make_shared<kernelspec::WrapRequest>();
  auto user = std::make_shared<bool>(false);
  auto sys_prefix = std::make_shared<bool>(false);
  auto prefix = std::make_shared<std::string>();
  auto* wrap = ks->add_subcommand(
      "wrap",
      "Create a watched copy of an installed kernelspec; the original stays as it is. Front ends\n"
      "list it as a new kernel: the kernelspec \"<name>-watchdog\" (unless --name), shown as\n"
      "\"<its display name> (watchdog)\" (unless --display-name).");
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
                   "e.g. --run-option=--memory-limit=8G");
  wrap->add_flag("--force", request->force,
                 "Replace an earlier wrap of that name whose settings differ (or that broke: "
                 "the program or the interpreter moved)");
  wrap->footer("Example: kernel-watchdog kernelspec wrap python3 --run-option=--memory-limit=8G");

  auto unwrap_name = std::make_shared<std::string>();
  auto* unwrap = ks->add_subcommand("unwrap", "Remove a kernelspec that `wrap` created");
  unwrap->add_option("name", *unwrap_name, "The wrapped kernelspec")->required();
  unwrap->footer("Example: kernel-watchdog kernelspec unwrap python3-watchdog");

  auto* list = ks->add_subcommand("list", "Installed kernelspecs, and which are under watch");
  list->footer("Example: kernel-watchdog kernelspec list");

  return {
      ks, [=]() -> int {
        try {
          if (wrap->parsed()) {
            request->destination = !prefix->empty() ? kernelspec::Destination::kPrefix
                                   : *sys_prefix    ? kernelspec::Destination::kSysPrefix
                                                    : kernelspec::Destination::kUser;
            request->prefix = *prefix;
            request->watchdog_path = platform::self_executable();
            const auto outcome = kernelspec::wrap(*request);
            using What = kernelspec::WrapOutcome::What;
            const char* verb = outcome.what == What::kReplaced    ? "Replaced the wrap of '"
                               : outcome.what == What::kUnchanged ? "Already wrapped '"
                                                                  : "Wrapped '";
            std::cout << verb << request->source_name << "' as kernelspec '"
                      << outcome.dir.filename().string() << "' (front ends show \""
                      << outcome.display_name << "\") in " << outcome.dir.string()
                      << (outcome.what == What::kUnchanged ? " with these settings; unchanged" : "")
                      << "\n";
            return 0;
          }
          if (unwrap->parsed()) {
            std::cout << "Removed " << kernelspec::unwrap(*unwrap_name).string() << "\n";
            return 0;
          }
          if (list->parsed()) {
            const auto all = kernelspec::find_all();
            if (all.empty()) std::cout << "No kernelspecs found on the Jupyter path.\n";
            int broken = 0;
            for (const auto& k : all) {
              const auto info = kernelspec::wrap_info(k);
              const char* state = !info ? "-" : info->problem.empty() ? "watched" : "broken";
              std::printf("%-24s %-9s %-32s %s\n", k.name.c_str(), state,
                          k.spec.value("display_name", "").c_str(), k.dir.c_str());
              if (!info) continue;
              std::string options;
              for (const auto& o : info->run_options)
                options += " " + o;
              std::printf("    wraps %s, run options:%s\n",
                          info->wrapped_from.empty() ? "?" : info->wrapped_from.c_str(),
                          options.empty() ? " (none)" : options.c_str());
              if (!info->problem.empty()) {
                ++broken;
                std::printf("    cannot start: %s\n    fix: %s\n", info->problem.c_str(),
                            info->repair_command(k).c_str());
              }
            }
            if (broken > 0)
              std::cout << broken << " wrapped kernelspec(s) cannot start; run the fix shown.\n";
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
