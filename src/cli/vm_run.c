/*
 * `ntblend vm run NAME -- PROGRAM [ARG...]`: a program of the driver model (ntblend/pci.h)
 * run inside an emulated VM (docs/vm.md "For guests of the driver model"). It runs on the
 * VM's host, as `ntblend run` would start it there, with $NTBLEND_VM naming the VM: its driver
 * model then sees the VM's devices at their guest BDFs, the VM's mediated configuration
 * space, BARs at guest-physical addresses, guest RAM for DMA and guest-physical I/O addresses.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int cli_vm_run(const char *fabric, const char *name, char **argv)
{
    struct fab *f;
    if (cli_attach(fabric, &f) < 0)
        return CLI_FAIL;
    int s = fab_vm_find(f, name);
    const struct fab_vm *v = s < 0 ? NULL : fab_vm(f, (uint32_t)s);
    const struct fab_host *h = v ? fab_host(f, v->host) : NULL;
    char host[TOPO_NAME_MAX] = "", life[16] = "";
    int rc = CLI_FAIL;
    if (!v) {
        cli_err("no VM named %s on fabric %s (ntblend vm list shows them; start one with "
                "ntblend vm start %s --host H --mem SIZE --guest emulated --device DEV)", name,
                f->ctl->name, name);
    } else if (strcmp(v->guest, "emulated")) {
        cli_err("VM %s is a QEMU guest: its programs run under its own Linux (ntblend vm console "
                "%s); vm run is for emulated guests (vm start --guest emulated)", name, name);
    } else if (atomic_load(&v->state) != FAB_VM_RUNNING) {
        cli_err("VM %s is %s: wait until it runs (ntblend vm list)", name,
                atomic_load(&v->state) == FAB_VM_STARTING ? "starting" : "stopping");
    } else if (atomic_load(&h->state) != FAB_HOST_UP) {
        cli_err("VM %s's host %s is %s", name, h->name, cli_state_name(atomic_load(&h->state)));
    } else {
        snprintf(host, sizeof host, "%s", h->name);
        snprintf(life, sizeof life, "%u", atomic_load(&h->boot_gen));
        rc = CLI_OK;
    }
    fab_detach(f);
    if (rc != CLI_OK)
        return rc;
    /* As `ntblend run --host H`: the program is a process of the VM's host, of this life. */
    if (setenv("NTBLEND_FABRIC", fabric, 1) < 0 || setenv("NTBLEND_HOST", host, 1) < 0 ||
        setenv("NTBLEND_HOST_BOOT", life, 1) < 0 || setenv("NTBLEND_VM", name, 1) < 0 ||
        cli_run_env() < 0) {
        cli_err("cannot set the environment: %s", strerror(errno));
        return CLI_FAIL;
    }
    fflush(NULL);
    execvp(argv[0], argv);
    int e = errno;
    cli_err("cannot run '%s': %s", argv[0], strerror(e));
    return e == ENOENT ? 127 : 126; /* as a shell would say */
}
