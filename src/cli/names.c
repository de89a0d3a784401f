/*
 * `ntblend names`: the names of the fabrics that are up, or of a fabric's hosts, adapters,
 * switches, devices or running VMs, one a line, for scripts and shell completion (the bash
 * completion of ntblend completes fabric, host, device and VM names with it). Nothing else is printed, so the
 * output can be used as it is.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "fab_vm.h"

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The fabrics whose state is in the shared-memory directory (ntblend.NAME/ctl), sorted. */
static int list_fabrics(void)
{
    char dir[256];
    /* The directory every fabric's state is in: the parent of any fabric's. */
    if (fab_dir("x", dir, sizeof dir) < 0) {
        cli_err("names: the shared-memory directory's name is too long (NTBLEND_SHM_DIR)");
        return CLI_FAIL;
    }
    *strrchr(dir, '/') = '\0';
    DIR *d = opendir(dir);
    if (!d) {
        cli_err("names: cannot read %s: %m", dir);
        return CLI_FAIL;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = CLI_OK;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "ntblend.", 8) != 0 || !e->d_name[8])
            continue;
        char ctl[600];
        struct stat st;
        snprintf(ctl, sizeof ctl, "%s/%s/ctl", dir, e->d_name);
        if (stat(ctl, &st) < 0)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **m = realloc(names, cap * sizeof *names);
            if (!m) {
                rc = CLI_FAIL;
                break;
            }
            names = m;
        }
        if (!(names[n] = strdup(e->d_name + 8))) {
            rc = CLI_FAIL;
            break;
        }
        n++;
    }
    closedir(d);
    if (rc == CLI_OK) {
        qsort(names, n, sizeof *names, cmp_str);
        for (size_t i = 0; i < n; i++)
            puts(names[i]);
    } else {
        cli_err("names: out of memory");
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

int cmd_names(struct cli *c)
{
    struct cli_opts o;
    int first;
    int rc = cli_parse(c, 0, false, &o, &first);
    if (rc >= 0)
        return rc;
    if (c->argc - first != 1)
        return cli_usage_error("names", "name one kind: fabrics, hosts, adapters, switches, "
                                        "devices or vms");
    const char *what = c->argv[first];
    if (strcmp(what, "fabrics") == 0)
        return list_fabrics();
    enum { HOSTS, ADAPTERS, SWITCHES, DEVICES, VMS } kind;
    if (strcmp(what, "hosts") == 0)
        kind = HOSTS;
    else if (strcmp(what, "adapters") == 0)
        kind = ADAPTERS;
    else if (strcmp(what, "switches") == 0)
        kind = SWITCHES;
    else if (strcmp(what, "devices") == 0)
        kind = DEVICES;
    else if (strcmp(what, "vms") == 0)
        kind = VMS;
    else
        return cli_usage_error("names", "unknown kind '%s' (fabrics, hosts, adapters, "
                                        "switches, devices or vms)", what);
    struct fab *f;
    if (cli_attach(o.fabric, &f) < 0)
        return CLI_FAIL;
    const struct fab_ctl *ctl = f->ctl;
    switch (kind) {
    case HOSTS:
        for (uint32_t i = 0; i < ctl->nhosts; i++)
            puts(fab_host(f, i)->name);
        break;
    case ADAPTERS:
        for (uint32_t i = 0; i < ctl->nadapters; i++)
            puts(fab_adapter(f, i)->name);
        break;
    case SWITCHES:
        for (uint32_t i = 0; i < ctl->nswitches; i++)
            puts(fab_switch(f, i)->name);
        break;
    case DEVICES:
        for (uint32_t i = 0; i < ctl->nfuncs; i++)
            puts(fab_func(f, i)->name);
        break;
    case VMS:
        for (uint32_t i = 0; i < FAB_MAX_VMS; i++)
            if (fab_vm_live(f, i))
                printf("%.*s\n", (int)sizeof fab_vm(f, i)->name, fab_vm(f, i)->name);
        break;
    }
    fab_detach(f);
    return CLI_OK;
}
