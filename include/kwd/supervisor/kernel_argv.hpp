#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kwd::supervisor {

// The connection file named in a kernel's argv: `-f PATH`, `-f=PATH`, `--f=PATH`,
// `--f PATH`, `--connection-file PATH`, `--connection-file=PATH` (ipykernel and most
// kernels built on its launcher accept these).
std::optional<std::string> find_connection_file(const std::vector<std::string>& kernel_argv);

// "kernel-4f6c….json" -> "4f6c…"; otherwise the file's stem; "" without a file.
std::string kernel_id_from_connection_file(const std::string& path);

}  // namespace kwd::supervisor
