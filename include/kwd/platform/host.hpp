#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace kwd::platform {

// What differs between the platforms outside the probes, one implementation per platform
// folder (src/platform/linux/host.cpp, src/platform/darwin/host.cpp).

// Absolute path of the running kernel-watchdog executable.
std::filesystem::path self_executable();

// The command that opens a file with the desktop's default application (xdg-open, open).
std::string default_opener();

// Jupyter's per-user data directory when $JUPYTER_DATA_DIR does not say
// (jupyter_core.paths.jupyter_data_dir).
std::filesystem::path jupyter_user_data_dir();

// What tells this boot of the machine from the next (Linux: the kernel's random boot_id;
// macOS: kern.bootsessionuuid); "" when it cannot be read.
std::string boot_id();

// This process's resident memory in bytes; -1 when it cannot be read.
std::int64_t self_resident_bytes();

// Internal steps of the executable that must run before anything else is set up (Linux:
// entering the kernel's own memory cgroup, then exec'ing the kernel). The exit status when
// argv names one; nullopt otherwise.
std::optional<int> run_internal_step(int argc, char** argv);

}  // namespace kwd::platform
