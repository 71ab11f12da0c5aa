#include "kwd/hang/thread_snapshot.hpp"

namespace kwd::hang {

std::string describe_state(char letter) {
  const char* what = "unknown";
  switch (letter) {
    case 'R':
      what = "running";
      break;
    case 'S':
      what = "sleeping";
      break;
    case 'D':
      what = "disk sleep";
      break;
    case 'T':
      what = "stopped";
      break;
    case 't':
      what = "tracing stop";
      break;
    case 'Z':
      what = "zombie";
      break;
    case 'X':
      what = "dead";
      break;
    case 'I':
      what = "idle";
      break;
    case 'P':
      what = "parked";
      break;
    case 'W':
      what = "waking";
      break;
    case 'K':
      what = "wakekill";
      break;
    default:
      break;
  }
  return std::string(1, letter) + " (" + what + ")";
}

}  // namespace kwd::hang
