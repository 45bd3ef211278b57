/* The size arguments of the peer baselines (mpi_perf.c, gloo_perf.cc), read as braid-perf reads
 * its own: a decimal count with an optional K, M or G suffix (x1024), then an optional "i" and
 * "B" ("4M", "4MiB", "4MB"). C and C++: each baseline is built apart from braid. */
#pragma once

#include <stddef.h>
#include <stdlib.h>

/* 0 and *out set, or -1 when s is not a size. */
static inline int baselineParseSize(const char* s, size_t* out) {
  char* end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) return -1;
  switch (*end | 0x20) {
    case 'k':
      v <<= 10;
      ++end;
      break;
    case 'm':
      v <<= 20;
      ++end;
      break;
    case 'g':
      v <<= 30;
      ++end;
      break;
    default:
      break;
  }
  if (*end == 'i' || *end == 'I') ++end;
  if (*end == 'b' || *end == 'B') ++end;
  if (*end != '\0') return -1;
  *out = (size_t)v;
  return 0;
}
