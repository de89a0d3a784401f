/*
 * Programs the CLI starts beside itself (paths.c finds them): starting one in the background
 * (a session of its own, its output in a log) that says on a pipe when it is ready — the NVMe
 * manager, a VM's process.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

pid_t cli_spawn_ready(const char *exe, char **args, int fd_arg, const char *log, int timeout_ms,
                      const char *what)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        cli_err("pipe: %s", strerror(errno));
        return -1;
    }
    char fdarg[16];
    snprintf(fdarg, sizeof fdarg, "%d", pfd[1]);
    args[fd_arg] = fdarg;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        cli_err("fork: %s", strerror(errno));
        close(pfd[0]);
        close(pfd[1]);
        return -1;
    }
    if (pid == 0) {
        setsid();
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        if (nul >= 0)
            dup2(nul, 0);
        fcntl(pfd[1], F_SETFD, 0); /* the program keeps the ready pipe */
        execv(exe, args);
        _exit(127);
    }
    close(pfd[1]);
    struct pollfd p = { .fd = pfd[0], .events = POLLIN };
    char line[32] = "";
    ssize_t got = 0;
    if (poll(&p, 1, timeout_ms) > 0)
        got = read(pfd[0], line, sizeof line - 1);
    close(pfd[0]);
    if (got > 0)
        return pid;
    cli_err("%s did not start; its log (%s) says:", what, log);
    FILE *lf = fopen(log, "r");
    char buf[512];
    while (lf && fgets(buf, sizeof buf, lf))
        fprintf(stderr, "  %s", buf);
    if (lf)
        fclose(lf);
    if (!cli_pid_gone(pid))
        kill(pid, SIGTERM);
    return -1;
}
