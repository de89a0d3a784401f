/*
 * Bodies of the fabric fixture declared in fixture.h (what that header says), but for what
 * needs the fabric model (fixture_fab.c).
 */
#define _GNU_SOURCE
#include "fixture.h"

/* Write the topology's text to a file of its own; its path in path. */
static int fx_write_ini(const char *ini, char *path, size_t n)
{
    snprintf(path, n, "/tmp/ntblend-fixture-%d-XXXXXX.ini", (int)getpid());
    int fd = mkstemps(path, 4);
    if (fd < 0)
        return -1;
    size_t len = strlen(ini);
    ssize_t w = write(fd, ini, len);
    close(fd);
    if (w != (ssize_t)len) {
        unlink(path);
        return -1;
    }
    return 0;
}

static int fx_boot(struct fx *fx, const struct fx_opts *o)
{
    if (!o->ini)
        return h_up(fx->name, o->topo);
    char path[128];
    if (fx_write_ini(o->ini, path, sizeof path)) {
        fprintf(stderr, "fixture %s: cannot write its topology to /tmp: %s\n", fx->name,
                strerror(errno));
        return -1;
    }
    int rc = h_up(fx->name, path);
    unlink(path);
    return rc;
}

int fx_up(struct fx *fx, const char *test, const struct fx_opts *o)
{
    memset(fx, 0, sizeof *fx);
    snprintf(fx->name, sizeof fx->name, "%s", h_fabric_name(test));
    if (!o->topo == !o->ini) {
        fprintf(stderr, "fixture %s: give a topology file (.topo) or its text (.ini), one of them\n",
                fx->name);
        return -1;
    }
    if (o->nvme_dir) {
        snprintf(fx->nvme_dir, sizeof fx->nvme_dir, "/var/tmp/ntblend-test-%s", fx->name);
        const char *was = getenv("NTBLEND_NVME_DIR");
        fx->nvme_dir_was = was ? strdup(was) : NULL;
        setenv("NTBLEND_NVME_DIR", fx->nvme_dir, 1);
    }
    fx->up = true; /* from here on fx_down has something to undo, whatever fails next */
    int rc = fx_boot(fx, o);
    if (rc) {
        fprintf(stderr, "fixture %s: `ntblend up %s` failed (exit %d; its errors are above)\n",
                fx->name, o->topo ? o->topo : "(the test's topology)", rc);
        return -1;
    }
    for (int i = 0; i < FX_MAX_ADD && o->add[i]; i++)
        if ((rc = h_cli(fx->name, "device add %s >/dev/null", o->add[i]))) {
            fprintf(stderr, "fixture %s: `ntblend device add %s` failed (exit %d)\n", fx->name,
                    o->add[i], rc);
            return -1;
        }
    if (o->attach && o->attach(fx)) {
        fprintf(stderr, "fixture %s: cannot attach to the fabric's state\n", fx->name);
        return -1;
    }
    return 0;
}

void fx_down(struct fx *fx)
{
    if (!fx || !fx->up)
        return;
    if (fx->detach)
        fx->detach(fx);
    fx->detach = NULL;
    h_down(fx->name);
    /* `down` removes the NVMe models' namespace images; what a model left beside them in the
     * fabric's directory (of the fixture's own name) goes too, and a directory of the
     * fixture's own with it. */
    if (fx->nvme_dir[0]) {
        h_sh("rm -rf '%s'", fx->nvme_dir);
        if (fx->nvme_dir_was)
            setenv("NTBLEND_NVME_DIR", fx->nvme_dir_was, 1);
        else
            unsetenv("NTBLEND_NVME_DIR");
        free(fx->nvme_dir_was);
        fx->nvme_dir_was = NULL;
    } else {
        const char *root = getenv("NTBLEND_NVME_DIR");
        h_sh("rm -rf '%s/%s'", root && *root ? root : "/var/tmp/ntblend", fx->name);
    }
    fx->up = false;
}

int fx_setup(void **state, struct fx *fx, const char *test, const struct fx_opts *o)
{
    *state = fx;
    return fx_up(fx, test, o);
}

int fx_teardown(void **state)
{
    fx_down(*state);
    return 0;
}
