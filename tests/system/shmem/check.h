/* Shared by the OpenSHMEM test programs: fail loudly, exit non-zero. */
#ifndef SHMEM_TEST_CHECK_H
#define SHMEM_TEST_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "PE %d: %s:%d: check failed: %s: ", shmem_my_pe(), __FILE__,     \
                    __LINE__, #cond);                                                          \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fputc('\n', stderr);                                                               \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)
#endif
