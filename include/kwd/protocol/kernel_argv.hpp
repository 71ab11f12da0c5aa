#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kwd::protocol {

// The connection file named in a kernel's argv: `-f PATH`, `-f=PATH`, `--f=PATH`,
// `--f PATH`, `--connection-file PATH`, `--connection-file=PATH` (ipykernel and most
// kernels built on its launcher accept these), `--control_file PATH` (evcxr), R's
// `--args PATH.json` (IRkernel: R or Rscript running IRkernel::main), else, for julia (IJulia) and
// gophernotes, a plain argument named as jupyter_client names the files it writes,
// `kernel-<id>.json`.
std::optional<std::string> find_connection_file(const std::vector<std::string>& kernel_argv);

// Where the kernel will read (or write) the file it was given, as ipykernel resolves it: an
// absolute path as it is; a relative one in the working directory if it is there, else in
// Jupyter's runtime directory ($JUPYTER_RUNTIME_DIR, or runtime/ under the user data dir);
// a bare name found in neither is one the kernel creates in the runtime directory.
std::string resolve_connection_file(const std::string& named);

// Whether the kernel answers heartbeats while a cell runs: every kernel built on ipykernel or
// xeus does (from a thread of its own), IRkernel does not (`R ... -e IRkernel::main()`).
bool answers_heartbeat_while_busy(const std::vector<std::string>& kernel_argv);

// `kernel-watchdog [options] run ... -- KERNEL...` or `kernel-watchdog smoke ...`: a launcher
// that watches the kernels it starts itself.
bool is_watchdog_launcher(const std::vector<std::string>& argv);

// "kernel-4f6c….json" -> "4f6c…"; otherwise the file's stem; "" without a file.
std::string kernel_id_from_connection_file(const std::string& path);

}  // namespace kwd::protocol
