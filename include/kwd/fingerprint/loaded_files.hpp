#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kwd::fingerprint {

// The files a process has mapped, from the text of /proc/PID/maps: sorted, unique, without
// anonymous and special mappings ([heap], [stack], ...). A file replaced on disk since it
// was mapped keeps its path (the " (deleted)" mark is dropped).
std::vector<std::string> mapped_files(std::string_view maps_text);

}  // namespace kwd::fingerprint
