/* The C tests' check of a strata call: on failure, exits naming the rank (a `rank` in scope),
 * the place, the call, its result and strataGetLastError(). */
#ifndef STRATA_TESTS_C_ABI_CHECK_H
#define STRATA_TESTS_C_ABI_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <strata.h>

#define CHECK(call)                                                                      \
  do {                                                                                   \
    strataResult_t r_ = (call);                                                          \
    if (r_ != strataSuccess) {                                                           \
      fprintf(stderr, "rank %d: %s:%d: %s -> %s: %s\n", rank, __FILE__, __LINE__, #call, \
              strataGetErrorString(r_), strataGetLastError());                           \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

#endif
