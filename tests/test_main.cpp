// Catch2's main(), built once and linked into every test executable.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
