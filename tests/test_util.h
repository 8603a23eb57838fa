/* A minimal check framework: each CHECK counts as one test; main ends with
 * TEST_SUMMARY(), which prints "N passed, M failed" and returns nonzero on
 * any failure. */
#ifndef MLA_TEST_UTIL_H
#define MLA_TEST_UTIL_H

#include <stdio.h>

static int test_passed_, test_failed_;

#define CHECK(cond)                                                                               \
    do {                                                                                          \
        if (cond) {                                                                               \
            ++test_passed_;                                                                       \
        } else {                                                                                  \
            ++test_failed_;                                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);             \
        }                                                                                         \
    } while (0)

#define CHECK_STATUS(expr, expected)                                                              \
    do {                                                                                          \
        mla_status st_ = (expr);                                                                  \
        if (st_ == (expected)) {                                                                  \
            ++test_passed_;                                                                       \
        } else {                                                                                  \
            ++test_failed_;                                                                       \
            fprintf(stderr, "%s:%d: %s returned '%s', expected '%s'\n", __FILE__, __LINE__,       \
                    #expr, mla_status_name(st_), mla_status_name(expected));                     \
        }                                                                                         \
    } while (0)

#define TEST_SUMMARY()                                                                            \
    (printf("%d passed, %d failed\n", test_passed_, test_failed_), test_failed_ != 0)

#endif
