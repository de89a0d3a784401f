/*
 * ntblend extensions to OpenSHMEM. None yet: the header exists because the specification
 * requires it (programs include it unconditionally).
 */
#ifndef SHMEMX_H
#define SHMEMX_H

#include <shmem.h>

#endif
