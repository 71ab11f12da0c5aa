#include "kwd/platform/thread_name.hpp"

#include <pthread.h>

namespace kwd::platform {

// macOS names only the calling thread: its pthread_setname_np takes the name alone.
void name_this_thread(const char* name) {
  ::pthread_setname_np(name);
}

}  // namespace kwd::platform
