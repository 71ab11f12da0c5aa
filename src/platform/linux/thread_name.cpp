#include "kwd/platform/thread_name.hpp"

#include <pthread.h>

namespace kwd::platform {

void name_this_thread(const char* name) {
  ::pthread_setname_np(::pthread_self(), name);
}

}  // namespace kwd::platform
