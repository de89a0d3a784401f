/*
 * Error messages: each thread keeps the words of its last failure for nvme_errmsg(), so a
 * caller that got -ERANGE can tell the user which LBA and which namespace. Only failures
 * write it; the I/O path on success never touches it.
 */
#include <stdio.h>

#include "nvme_int.h"

static _Thread_local char last[256];

int nvl_fail(int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last, sizeof last, fmt, ap);
    va_end(ap);
    return rc;
}

const char *nvme_errmsg(void) { return last; }
