#include "kwd/protocol/kernel_argv.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "kwd/kernelspec/kernelspec.hpp"

namespace kwd::protocol {

namespace {

std::string_view program_name(const std::vector<std::string>& argv) {
  if (argv.empty()) return {};
  std::string_view program = argv[0];
  if (const auto slash = program.rfind('/'); slash != std::string_view::npos)
    program.remove_prefix(slash + 1);
  return program;
}

// jupyter_client names the files it writes "kernel-<id>.json".
bool named_like_a_connection_file(std::string_view arg) {
  const std::size_t slash = arg.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? arg : arg.substr(slash + 1);
  return name.size() > 12 && name.starts_with("kernel-") && name.ends_with(".json");
}

// The kernels known to take their connection file as a plain argument: IJulia's julia and
// gophernotes. Others with such an argument are its clients (`jupyter console --existing`) or
// tools looking at the file (an editor, jq): they are no kernel.
bool takes_a_plain_connection_file(std::string_view program) {
  return program.starts_with("julia") || program == "gophernotes";
}

}  // namespace

std::optional<std::string> find_connection_file(const std::vector<std::string>& argv) {
  static constexpr std::array<std::string_view, 4> kFlags{"-f", "--f", "--connection-file",
                                                          "--control_file"};
  const std::string_view program = program_name(argv);
  const bool irkernel = (program == "R" || program == "Rscript") &&
                        std::any_of(argv.begin(), argv.end(), [](const std::string& a) {
                          return a.find("IRkernel::main") != std::string::npos;
                        });
  std::optional<std::string> positional;
  // argv[0] is the program; scanning from 1 keeps a program called "-f" out of it.
  for (std::size_t i = 1; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg == "--") break;
    for (std::string_view flag : kFlags) {
      if (arg == flag && i + 1 < argv.size()) return argv[i + 1];
      if (arg.size() > flag.size() + 1 && arg.starts_with(flag) && arg[flag.size()] == '=')
        return arg.substr(flag.size() + 1);
    }
    // IRkernel: `R --slave -e IRkernel::main() --args FILE`, R's way to pass a script its own
    // arguments.
    if (irkernel && arg == "--args" && i + 1 < argv.size() && argv[i + 1].ends_with(".json"))
      return argv[i + 1];
    if (takes_a_plain_connection_file(program) && named_like_a_connection_file(arg))
      positional = arg;
  }
  return positional;
}

std::string resolve_connection_file(const std::string& named) {
  namespace fs = std::filesystem;
  const fs::path path(named);
  if (named.empty() || path.is_absolute()) return named;
  std::error_code ec;
  const fs::path in_cwd = fs::absolute(path, ec);
  if (ec) return named;
  if (fs::exists(in_cwd, ec)) return in_cwd.lexically_normal().string();
  const char* runtime_env = std::getenv("JUPYTER_RUNTIME_DIR");
  const fs::path runtime = runtime_env != nullptr && *runtime_env != '\0'
                               ? fs::path(runtime_env)
                               : kernelspec::user_data_dir() / "runtime";
  const fs::path in_runtime = runtime / path;
  if (fs::exists(in_runtime, ec)) return in_runtime.lexically_normal().string();
  if (!path.has_parent_path()) return in_runtime.lexically_normal().string();
  return in_cwd.lexically_normal().string();
}

bool answers_heartbeat_while_busy(const std::vector<std::string>& argv) {
  return std::none_of(argv.begin(), argv.end(), [](const std::string& arg) {
    return arg.find("IRkernel::main(") != std::string::npos;
  });
}

bool is_watchdog_launcher(const std::vector<std::string>& argv) {
  if (argv.size() < 2 || std::filesystem::path(argv[0]).filename() != "kernel-watchdog")
    return false;
  for (std::size_t i = 1; i < argv.size(); ++i) {
    if (argv[i] == "run" || argv[i] == "smoke") return true;
    if (argv[i] == "--") break;
  }
  return false;
}

std::string kernel_id_from_connection_file(const std::string& path) {
  if (path.empty()) return {};
  std::string stem = std::filesystem::path(path).stem().string();
  if (stem.starts_with("kernel-")) stem.erase(0, 7);
  return stem;
}

}  // namespace kwd::protocol
