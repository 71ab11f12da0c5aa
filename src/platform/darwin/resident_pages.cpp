#include "kwd/platform/resident_pages.hpp"

namespace kwd::platform {

// Not done on macOS: its shared cache of system libraries is mapped for every process alike.
std::size_t release_unwritten_file_pages() noexcept {
  return 0;
}

}  // namespace kwd::platform
