#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kwd::smoke {

// One JUnit document from those `smoke --junit` wrote in the jobs of a sharded run: their
// test suites in the order of the files, the totals summed. Only files smoke wrote are taken
// (their first element says so); throws std::runtime_error naming any other, or one cut short.
std::string merge_junit(const std::vector<std::filesystem::path>& files);

}  // namespace kwd::smoke
