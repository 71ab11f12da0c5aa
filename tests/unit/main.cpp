#define CATCH_CONFIG_MAIN
// clang-format off
#include <cfloat>  // first: Catch2 2 uses DBL_MAX_10_EXP, which newer libc++ no longer brings
#include <catch2/catch.hpp>
// clang-format on
