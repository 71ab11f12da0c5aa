#pragma once

#include <filesystem>
#include <string_view>
#include <vector>

#include "kwd/smoke/gpu_placement.hpp"

namespace kwd::smoke {

// CTest's resource specification file (ctest --resource-spec-file; version 1.0): the GPUs of
// its one "local" node, each an id and a number of slots. smoke places a notebook on one slot
// of one of them, as CTest places a test that asks for "gpus:1", and tells the kernel which
// through CTEST_RESOURCE_GROUP_* (gpu_environment). Throws std::runtime_error naming the file
// and what is wrong; resources of other types are ignored, as a test asks for none of them.
std::vector<SmokeGpu> gpus_of_resource_spec(std::string_view text, const std::string& file);
std::vector<SmokeGpu> read_resource_spec(const std::filesystem::path& file);

}  // namespace kwd::smoke
