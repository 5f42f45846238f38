// The Catch2 (v2) main for asyncnd_tests; every other tests/*.cpp holds only test cases.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
