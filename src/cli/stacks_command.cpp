#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "kwd/cli/commands.hpp"
#include "kwd/cli/kernel_target.hpp"
#include "kwd/report/terminal_text.hpp"
#include "kwd/stacks/pure.hpp"
#include "kwd/stacks/stacks.hpp"
#include "kwd/stacks/stacks_json.hpp"

namespace kwd::cli {

Command add_stacks_command(CLI::App& app) {
  auto target = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  auto no_python = std::make_shared<bool>(false);
  auto no_native = std::make_shared<bool>(false);
  auto max_threads = std::make_shared<std::size_t>(256);
  auto max_frames = std::make_shared<std::size_t>(128);
  auto* cmd = app.add_subcommand(
      "stacks",
      "Where a running kernel is: every thread's state, what it waits in, and its stack, native\n"
      "frames (libdw) joined with Python frames (most recent first), like `py-spy dump --native`.\n"
      "The threads are stopped for a moment (ptrace) and let go; the kernel goes on running.");
  cmd->add_option("KERNEL", *target,
                  "A pid (a `kernel-watchdog run` launcher's pid means its kernel), a kernel id, "
                  "or a connection file")
      ->required();
  cmd->add_flag("--json", *as_json, "One JSON document (the report's `stacks` section)");
  cmd->add_flag("--no-python", *no_python,
                "Do not ask the kernel for its Python frames (no signal is sent)");
  cmd->add_flag("--no-native", *no_native, "Do not stop the threads for their native frames");
  cmd->add_option("--max-threads", *max_threads, "Threads shown at most")->capture_default_str();
  cmd->add_option("--max-frames", *max_frames, "Native frames a thread at most")
      ->capture_default_str();
  cmd->footer(
      "Examples:\n"
      "  kernel-watchdog stacks 4242            # a kernel's pid (or its launcher's)\n"
      "  kernel-watchdog stacks 4f6c0d2e        # a kernel id, as in kernel-4f6c0d2e.json\n"
      "  kernel-watchdog stacks 4242 --json | jq '.threads[] | {tid, state, joined}'\n"
      "Native frames need elfutils' libdw.so.1 and the right to trace the kernel (same user\n"
      "with Yama's ptrace_scope 0, or root/CAP_SYS_PTRACE). Python frames come from a kernel\n"
      "started by `kernel-watchdog run` (its start-up hook dumps them on SIGRTMIN+10); for\n"
      "others the output says why there are none. Exit status: 0 shown (parts may be missing,\n"
      "as said), 1 no such kernel.");
  return {cmd, [=]() -> int {
            std::string why;
            const auto pid = find_kernel_process(*target, why);
            if (!pid) {
              std::cerr << "kernel-watchdog stacks: " << why << "\n";
              return 1;
            }
            stacks::CaptureOptions options;
            options.python = !*no_python;
            options.native = !*no_native;
            options.max_threads = *max_threads;
            options.max_frames = *max_frames;
            const auto result = stacks::capture_stacks(*pid, options);
            if (!result.found) {
              std::cerr << "kernel-watchdog stacks: no process " << *pid << "\n";
              return 1;
            }
            // Thread names and symbols are the kernel's to choose: no terminal escapes.
            std::cout << (*as_json ? stacks::to_json(result).dump(2) + "\n"
                                   : report::terminal_safe(stacks::render_text(result)));
            return 0;
          }};
}

}  // namespace kwd::cli
