/*
 * libshmem's diagnostics, the floor every other file stands on: a fatal error (the program
 * stops) and SHMEM_DEBUG's messages, each one line on stderr with the PE's number.
 */
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "shmem_internal.h"

/* One line on stderr in one write (one fprintf on the unbuffered stream), so that the lines
 * of PEs sharing a terminal do not run into each other. */
static void say(const char *head, int pe, const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (pe >= 0)
        fprintf(stderr, "%s: PE %d: %s\n", head, pe, msg);
    else
        fprintf(stderr, "%s: %s\n", head, msg);
}

void shm_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    /* Without a PE number before we know it, or in a node (oshrelay). */
    say("shmem", shm.initialized ? shm.me : -1, fmt, ap);
    va_end(ap);
    fflush(stderr);
    _exit(1);
}

void shm_debug(const char *fmt, ...)
{
    if (!shm.debug)
        return;
    va_list ap;
    va_start(ap, fmt);
    say(shm.me >= 0 ? "shmem debug" : "shmem debug: node", shm.me, fmt, ap);
    va_end(ap);
}
