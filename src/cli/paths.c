/*
 * Where ntblend finds the programs and files it starts or hands on: the host agent, the NVMe
 * manager and ntblend-nvmefs, the helpers' directory that `ntblend run` puts first on PATH
 * (the tools and drivers), and the fio engine. Everything is found from this executable's own
 * location, so the same binary works in the build tree (all programs in bin/, the engine in
 * lib/) and installed under any prefix (bin/, libexec/ntblend/, lib/ntblend/; the relative
 * directories come from install_dirs.h, generated from GNUInstallDirs); and where a VM's guest
 * image is by default, in the build tree or for an installed ntblend.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "install_dirs.h"

/* The directory this executable is in. */
static int self_dir(char *out, size_t len)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return -errno;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash)
        return -ENOENT;
    *slash = '\0';
    int w = snprintf(out, len, "%s", self[0] ? self : "/");
    return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

/* out = a/b, canonical when it exists (messages and PATH then show a plain path). */
static int join(char *out, size_t len, const char *a, const char *b)
{
    char tmp[PATH_MAX];
    int w = snprintf(tmp, sizeof tmp, "%s/%s", a, b);
    if (w < 0 || (size_t)w >= sizeof tmp)
        return -ENAMETOOLONG;
    char real[PATH_MAX];
    const char *p = realpath(tmp, real) ? real : tmp;
    w = snprintf(out, len, "%s", p);
    return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

int cli_helpers_dir(char *out, size_t len)
{
    char self[PATH_MAX];
    int rc = self_dir(self, sizeof self);
    if (rc)
        return rc;
    rc = join(out, len, self, NTBLEND_REL_BIN_TO_HELPERS);
    if (rc == 0 && is_dir(out))
        return 0;
    /* The build tree: the helpers are beside ntblend. */
    return join(out, len, self, ".");
}

int cli_sibling(const char *name, char *out, size_t len)
{
    char self[PATH_MAX], dir[PATH_MAX];
    int rc = self_dir(self, sizeof self);
    if (rc)
        return rc;
    /* Beside ntblend: the build tree, and the programs installed in bin/ with it. */
    rc = join(out, len, self, name);
    if (rc == 0 && access(out, X_OK) == 0)
        return 0;
    rc = join(dir, sizeof dir, self, NTBLEND_REL_BIN_TO_HELPERS);
    if (rc == 0)
        rc = join(out, len, dir, name);
    if (rc)
        return rc;
    return access(out, X_OK) == 0 ? 0 : -errno;
}

int cli_fio_engine(char *out, size_t len)
{
    static const char *const where[] = { NTBLEND_REL_BIN_TO_PKGLIB, "../lib" };
    char self[PATH_MAX], dir[PATH_MAX];
    int rc = self_dir(self, sizeof self);
    if (rc)
        return rc;
    for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) {
        if (join(dir, sizeof dir, self, where[i]) || join(out, len, dir, "ntbnvme-fio.so"))
            continue;
        if (access(out, R_OK) == 0)
            return 0;
    }
    return -ENOENT;
}

void cli_vm_image(char *out, size_t len)
{
    const char *env = getenv("NTBLEND_VM_IMAGE");
    if (env && *env) {
        snprintf(out, len, "%s", env);
        return;
    }
    char self[PATH_MAX], cache[PATH_MAX + 32];
    /* A build tree (CMakeCache.txt above bin/): its vm-guest/, as before an install. */
    if (self_dir(self, sizeof self) == 0) {
        snprintf(cache, sizeof cache, "%s/../CMakeCache.txt", self);
        if (access(cache, F_OK) == 0 && join(out, len, self, "../vm-guest") == 0)
            return;
    }
    /* Installed: the cache ntblend-vm-guest fills by default (the same rule as its own). */
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg)
        snprintf(out, len, "%s/ntblend/vm-guest", xdg);
    else
        snprintf(out, len, "%s/.cache/ntblend/vm-guest", home && *home ? home : "");
}
