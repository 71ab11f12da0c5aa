#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kwd/platform/root_view.hpp"

namespace kwd::fingerprint {

// An R package with compiled code, from the shared object R loaded for it
// (<library>/<package>/libs/<name>.so) and the DESCRIPTION file beside that directory.
struct RPackage {
  std::string name;
  std::string version;  // "" when DESCRIPTION could not be read
  std::string path;     // the package's directory
};

// R as a kernel's maps show it: libR.so loaded (an IRkernel, or any kernel that embeds R).
struct RRuntime {
  std::string home;                // R_HOME: the directory above libR.so's lib/
  std::string version;             // from R_HOME/library/base/DESCRIPTION; "" when unread
  std::vector<RPackage> packages;  // those whose native code was loaded, by name
};

// The R runtime of a process whose mapped files are `files` (sorted or not); nullopt when
// libR.so is not among them. Files are read through `root`, as the kernel names them.
std::optional<RRuntime> find_r_runtime(const platform::RootView& root,
                                       const std::vector<std::string>& files);

// The package directory of an R package's shared object
// ("/usr/lib/R/site-library/cli/libs/cli.so" -> "/usr/lib/R/site-library/cli"), or nullopt.
std::optional<std::string> r_package_dir(const std::string& file);

// "Version: 4.2.2" and "Package: cli" lines of a DESCRIPTION file (DCF).
std::optional<std::string> dcf_field(const std::string& text, const std::string& field);

nlohmann::json to_json(const RRuntime& r);

}  // namespace kwd::fingerprint
