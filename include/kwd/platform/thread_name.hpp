#pragma once

namespace kwd::platform {

// Names the calling thread (at most 15 characters on Linux), so that `top -H`, a debugger and
// the tests can tell it from ZeroMQ's threads.
void name_this_thread(const char* name);

}  // namespace kwd::platform
