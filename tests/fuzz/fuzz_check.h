// What the fuzz targets share: a failed check aborts with a message (libFuzzer then keeps the
// input as a crash; the replay driver fails its test).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#define BRAID_FUZZ_CHECK(cond, what)                                                          \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "fuzz check failed at %s:%d: %s: %s\n", __FILE__, __LINE__, #cond, \
                   std::string(what).c_str());                                                \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)
