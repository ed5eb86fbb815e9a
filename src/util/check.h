// GOOSE_CHECK: invariants inside the engine (programming errors, never user input).
// A failed check prints file:line and the condition and aborts. User input is validated at the
// boundaries and reported through Status (status.h) instead.
#pragma once

#include <cstdio>
#include <cstdlib>

#define GOOSE_CHECK(cond)                                                                 \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "%s:%d: GOOSE_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)

#ifdef NDEBUG
#define GOOSE_DCHECK(cond) \
  do {                     \
  } while (0)
#else
#define GOOSE_DCHECK(cond) GOOSE_CHECK(cond)
#endif
