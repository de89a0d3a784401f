/*
 * ntblend-nvme-manager: run the manager of an NVMe (nvme_manager_start()) in this process
 * until SIGINT or SIGTERM. Started by `ntblend nvme manager DEVICE --host H`, which sets the
 * host context; usable directly under `ntblend run --host H --`.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ntblend/nvme.h"
#include "ntblend/version.h"

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

static void usage(FILE *f)
{
    fprintf(f,
            "ntblend-nvme-manager - the manager of an NVMe that many hosts share\n"
            "\n"
            "usage: ntblend-nvme-manager [--max-clients N] [--status-file FILE] [--ready-fd FD] "
            "DEVICE\n"
            "\n"
            "Owns the NVMe DEVICE (borrowed exclusively, reset, enabled, identified), then\n"
            "shares it: processes on any host that open DEVICE with libntbnvme become its\n"
            "clients and get I/O queue pairs of their own. Runs until SIGINT or SIGTERM, then\n"
            "deletes the clients' queues and shuts the controller down.\n"
            "Run it on a host: ntblend nvme manager DEVICE --host H (or ntblend run --host H --\n"
            "ntblend-nvme-manager DEVICE).\n"
            "\n"
            "options:\n"
            "  --max-clients N     serve at most N clients at once (default 1024)\n"
            "  --status-file FILE  keep FILE up to date with the manager's state as JSON\n"
            "  --ready-fd FD       write one line to FD once clients may connect, then close it\n"
            "  -h, --help          this text\n"
            "  -V, --version       the version\n");
}

static void write_status(const char *path, const char *dev, nvme_manager_t *m)
{
    struct nvme_manager_status st;
    struct nvme_manager_client cl[1024];
    int n = nvme_manager_status(m, &st, cl, 1024);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    fprintf(f,
            "{\"device\": \"%s\", \"pid\": %d, \"host\": \"%s\", \"clients\": %u, "
            "\"qpairs\": %u, \"max_qpairs\": %u, \"requests\": %llu, "
            "\"reclaimed_clients\": %llu, \"reclaimed_qpairs\": %llu, \"client_list\": [",
            dev, (int)getpid(), getenv("NTBLEND_HOST") ? getenv("NTBLEND_HOST") : "",
            st.clients, st.qpairs, st.max_qpairs, (unsigned long long)st.requests,
            (unsigned long long)st.reclaimed_clients, (unsigned long long)st.reclaimed_qpairs);
    for (int i = 0; i < n && i < 1024; i++)
        fprintf(f, "%s{\"node\": %u, \"pid\": %u, \"qpairs\": %u, \"requests\": %llu}",
                i ? ", " : "", cl[i].node, cl[i].pid, cl[i].qpairs,
                (unsigned long long)cl[i].requests);
    fprintf(f, "]}\n");
    if (fclose(f) == 0)
        rename(tmp, path);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "max-clients", required_argument, NULL, 'c' },
        { "status-file", required_argument, NULL, 's' },
        { "ready-fd", required_argument, NULL, 'r' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { 0 },
    };
    struct nvme_manager_opts mo = { .log = true };
    const char *status = NULL;
    int ready_fd = -1, ch;
    while ((ch = getopt_long(argc, argv, "hV", opts, NULL)) != -1) {
        char *end;
        switch (ch) {
        case 'c':
            mo.max_clients = (uint32_t)strtoul(optarg, &end, 10);
            if (*end || !mo.max_clients || mo.max_clients > 1024) {
                fprintf(stderr, "ntblend-nvme-manager: --max-clients takes 1..1024\n");
                return 2;
            }
            break;
        case 's': status = optarg; break;
        case 'r':
            ready_fd = (int)strtol(optarg, &end, 10);
            if (*end || ready_fd < 0) {
                fprintf(stderr, "ntblend-nvme-manager: --ready-fd takes a file descriptor\n");
                return 2;
            }
            break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("ntblend-nvme-manager (ntblend) %s\n", NTBLEND_VERSION); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "ntblend-nvme-manager: %s\n",
                optind >= argc ? "which device? (e.g. nvme0)" : "one device only");
        usage(stderr);
        return 2;
    }
    const char *dev = argv[optind];
    struct sigaction sa = { .sa_handler = on_signal };
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    nvme_manager_t *m;
    int rc = nvme_manager_start(dev, &mo, &m);
    if (rc) {
        fprintf(stderr, "ntblend-nvme-manager: %s\n", nvme_errmsg());
        return 1;
    }
    struct nvme_ctrl_info ci;
    nvme_ctrl_info(nvme_manager_dev(m), &ci);
    printf("nvme manager: %s (%s, serial %s) on host %s, pid %d: %u I/O queue pairs, %u "
           "namespace(s); serving clients\n", dev, ci.model, ci.serial,
           getenv("NTBLEND_HOST") ? getenv("NTBLEND_HOST") : "?", (int)getpid(), ci.max_qpairs,
           ci.namespaces);
    fflush(stdout);
    if (status)
        write_status(status, dev, m);
    if (ready_fd >= 0) {
        dprintf(ready_fd, "%d\n", (int)getpid());
        close(ready_fd);
    }
    struct nvme_manager_status last = { 0 };
    while (!stop) {
        struct timespec ts = { 0, 50 * 1000 * 1000 };
        nanosleep(&ts, NULL);
        struct nvme_manager_status st;
        nvme_manager_status(m, &st, NULL, 0);
        if (memcmp(&st, &last, sizeof st)) {
            if (st.reclaimed_clients != last.reclaimed_clients)
                printf("nvme manager: reclaimed %llu queue pair(s) of %llu client(s) that died "
                       "or were cut off so far\n", (unsigned long long)st.reclaimed_qpairs,
                       (unsigned long long)st.reclaimed_clients);
            fflush(stdout);
            last = st;
            if (status)
                write_status(status, dev, m);
        }
    }
    rc = nvme_manager_stop(m);
    if (status)
        unlink(status);
    printf("nvme manager: %s stopped%s\n", dev, rc ? " (shutdown reported an error)" : "");
    return rc ? 1 : 0;
}
