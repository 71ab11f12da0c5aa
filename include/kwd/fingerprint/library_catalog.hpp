#pragma once

#include <optional>
#include <string>

namespace kwd::fingerprint {

// What a loaded file is, for the fingerprint.
struct KnownFile {
  enum class Kind { kFramework, kNativeLibrary };
  Kind kind = Kind::kNativeLibrary;
  std::string name;     // "tensorflow", "torch", "cuDNN", "libcudart", "Intel OpenMP"...
  std::string version;  // from the file name when it carries one ("12.2.140"), else empty
};

// Frameworks are recognised by the import name they live under in site-packages
// (`top_level`), native libraries by their file name. nullopt for everything else.
std::optional<KnownFile> classify_framework(const std::string& top_level);
std::optional<KnownFile> classify_library(const std::string& path);

}  // namespace kwd::fingerprint
