#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace kwd::kernelspec {

struct KernelspecError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Kernelspec {
  std::string name;
  std::filesystem::path dir;  // holds kernel.json
  nlohmann::json spec;
  [[nodiscard]] bool wrapped() const;
};

// Jupyter's data path, searched in jupyter_core's order: $JUPYTER_PATH, the user data dir
// ($JUPYTER_DATA_DIR, else $XDG_DATA_HOME/jupyter or ~/.local/share/jupyter; ~/Library/Jupyter
// on macOS), the active environment's share/jupyter ($VIRTUAL_ENV, $CONDA_PREFIX), then
// /usr/local/share/jupyter and /usr/share/jupyter.
std::vector<std::filesystem::path> jupyter_data_path();
std::filesystem::path user_data_dir();

// Every kernelspec on the path; the first of each name wins, as in jupyter_client.
std::vector<Kernelspec> find_all();
std::optional<Kernelspec> find(const std::string& name);

enum class Destination { kUser, kSysPrefix, kPrefix };

struct WrapRequest {
  std::string source_name;
  std::string new_name;      // empty: "<source>-watchdog"
  std::string display_name;  // empty: "<source display name> (watchdog)"
  Destination destination = Destination::kUser;
  std::filesystem::path prefix;                // for kPrefix
  std::filesystem::path watchdog_path;         // absolute path of kernel-watchdog
  std::vector<std::string> extra_run_options;  // inserted between "run" and "--"
  bool force = false;                          // replace a wrap whose settings differ
};

struct WrapOutcome {
  enum class What { kCreated, kReplaced, kUnchanged };
  std::filesystem::path dir;  // its name is the new kernelspec's
  What what = What::kCreated;
  std::string display_name;  // what front ends show for it
};

// Creates the wrapped copy. An earlier wrap of the same name is left as it is when its
// settings are the same, replaced with `force`, and otherwise refused with the settings that
// differ, one line each. Throws KernelspecError.
WrapOutcome wrap(const WrapRequest& request);

// What a wrapped kernelspec runs, and whether it can still start.
struct WrapInfo {
  std::string wrapped_from;
  std::string watchdog;                  // argv[0]
  std::vector<std::string> run_options;  // between "run" and "--"
  std::vector<std::string> kernel_argv;  // after "--"
  std::string problem;                   // why it cannot start ("" when it can)
  // The command that makes `wrap` work again: wrap --force with the same settings, into the
  // same place, every word quoted for the shell.
  [[nodiscard]] std::string repair_command(const Kernelspec& wrap) const;
};
// nullopt for a kernelspec that is not a wrap.
std::optional<WrapInfo> wrap_info(const Kernelspec& spec);
// Removes a kernelspec that `wrap` created (and refuses any other). Returns its directory.
std::filesystem::path unwrap(const std::string& name);

}  // namespace kwd::kernelspec
