#include "kwd/probes/darwin/io_kit_library.hpp"

#include "kwd/platform/deferred_library.hpp"

namespace kwd::probes::darwin {
namespace {

struct Loaded {
  IoKitLibrary library;
  std::string missing;  // the first function not found, empty when every one was
};

template <typename Fn>
void find(platform::DeferredLibrary& framework, const char* name, Fn*& into, std::string& missing) {
  into = framework.function<Fn*>(name);
  if (into == nullptr && missing.empty()) missing = name;
}

Loaded load() {
  static platform::DeferredLibrary core_foundation(
      "/System/Library/Frameworks/CoreFoundation.framework/CoreFoundation");
  static platform::DeferredLibrary io_kit("/System/Library/Frameworks/IOKit.framework/IOKit");
  Loaded loaded;
#define KWD_IO_KIT_FIND(framework, name) \
  find(framework, #name, loaded.library.name, loaded.missing);
  KWD_IO_KIT_FUNCTIONS(KWD_IO_KIT_FIND)
#undef KWD_IO_KIT_FIND
  return loaded;
}

}  // namespace

const IoKitLibrary* IoKitLibrary::get(std::string& problem) {
  static const Loaded loaded = load();
  if (!loaded.missing.empty()) {
    problem = "I/O Kit or Core Foundation could not be opened, or lacks " + loaded.missing;
    return nullptr;
  }
  return &loaded.library;
}

}  // namespace kwd::probes::darwin
