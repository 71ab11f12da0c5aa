#pragma once

#include <filesystem>
#include <string_view>

namespace kwd::metrics {

// Writes `text` to `path` as node_exporter's textfile collector needs it: whole or not at
// all (a temporary beside it, created with O_EXCL and renamed over the old file), readable
// by the collector's user (0644: metrics hold no secrets). The temporary's name starts with
// a dot and does not end in .prom, so the collector never reads it. Throws
// std::system_error naming the path and the system's reason.
void write_textfile(const std::filesystem::path& path, std::string_view text);

}  // namespace kwd::metrics
