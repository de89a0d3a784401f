/*
 * Helpers the SISCI tests share (in children, on top of harness.h): a call's error checked
 * with the call named, and the fabric they run on (examples/topologies/smartio3.ini: hosts
 * a, b, c are nodes 4, 8, 12; nvme0 in a is fabric device 0x40001).
 */
#ifndef NTBLEND_TEST_SISCI_UTIL_H
#define NTBLEND_TEST_SISCI_UTIL_H

#include "fixture.h"
#include "sisci_api.h"

#define NODE_A 4u
#define NODE_B 8u
#define NODE_C 12u
#define NVME_FDID 0x40001ull

/* The tests' fabric, nvme0 lent out: booted by sisci_setup (a cmocka set-up; fx_teardown takes
 * it down) under a name of the test's own. */
extern struct fx FX;
int sisci_setup(void **state, const char *test);

/* Run a SISCI call whose last argument is &err and check err. */
#define SCI_OK(call)                                                                        \
    do {                                                                                    \
        sci_error_t err = 0x7fff;                                                           \
        (void)err;                                                                          \
        call;                                                                               \
        if (err != SCI_ERR_OK) {                                                            \
            fprintf(stderr, "%s:%d: %s: %s (0x%x)\n", __FILE__, __LINE__, #call,            \
                    SCIGetErrorString(err), err);                                           \
            _exit(1);                                                                       \
        }                                                                                   \
    } while (0)

sci_desc_t sci_start(void);

void sci_end(sci_desc_t sd);

#endif
