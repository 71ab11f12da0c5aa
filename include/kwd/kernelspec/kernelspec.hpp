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
};

// Creates the wrapped copy; returns its directory. Throws KernelspecError.
std::filesystem::path wrap(const WrapRequest& request);
// Removes a kernelspec that `wrap` created (and refuses any other). Returns its directory.
std::filesystem::path unwrap(const std::string& name);

}  // namespace kwd::kernelspec
