/*
 * Hop timestamps (src/wait/hop.c): off unless NTBLEND_HOP_TRACE names a directory, and then
 * nothing is written; on, every mark reaches the process's file in order, none lost when a
 * long run goes round the in-memory ring several times, a process that forks writes a file of
 * its own, and a directory that cannot be written is said so, not crashed on. Each case runs
 * in a child of its own (the environment is read once per process). No timing is asserted.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "hop.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/test_hop.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (e->d_name[0] != '.')
            unlink(p);
    }
    if (d)
        closedir(d);
    return rmdir(dir);
}

/* Run fn in a child with NTBLEND_HOP_TRACE set to `trace` (NULL: unset); its exit status. */
static int in_child(const char *trace, void (*fn)(void))
{
    pid_t pid = fork();
    if (pid == 0) {
        if (trace)
            setenv("NTBLEND_HOP_TRACE", trace, 1);
        else
            unsetenv("NTBLEND_HOP_TRACE");
        fn();
        exit(0); /* atexit writes what is left */
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* The files in dir, and the marks (lines not starting with '#') in all of them. */
static int count(int *files, long *marks)
{
    *files = 0;
    *marks = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (strncmp(e->d_name, "hop.", 4))
            continue;
        (*files)++;
        char p[512], line[256];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        FILE *f = fopen(p, "r");
        while (f && fgets(line, sizeof line, f))
            *marks += line[0] != '#';
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return 0;
}

static void ten_marks(void)
{
    for (uint32_t i = 0; i < 10; i++)
        hop_mark("x", i);
    hop_flush();
    if (atomic_load(&hop_state) != 0)
        exit(3);
}

static void test_off(void **state)
{
    (void)state;
    assert_int_equal(in_child(NULL, ten_marks), 0);
    assert_int_equal(in_child("", ten_marks), 0);
    int files;
    long marks;
    count(&files, &marks);
    assert_int_equal(files, 0);
}

static void some_marks(void)
{
    hop_mark("first", 1);
    hop_mark("second", 2);
    hop_flush();
    hop_flush(); /* nothing new: nothing written */
    hop_mark("third", 3); /* written at exit */
}

static void test_on(void **state)
{
    (void)state;
    assert_int_equal(in_child(dir, some_marks), 0);
    DIR *d = opendir(dir);
    struct dirent *e;
    char name[600] = "";
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, "hop.test_hop.", 13))
            snprintf(name, sizeof name, "%s/%s", dir, e->d_name);
    closedir(d);
    assert_true(name[0]);
    FILE *f = fopen(name, "r");
    assert_non_null(f);
    char line[256], what[32];
    unsigned long long t, prev = 0;
    unsigned tag;
    const char *want[] = { "first", "second", "third" };
    int n = 0, headers = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') {
            headers++;
            continue;
        }
        assert_int_equal(sscanf(line, "%llu %31s %u", &t, what, &tag), 3);
        assert_true(n < 3);
        assert_string_equal(what, want[n]);
        assert_int_equal(tag, (unsigned)n + 1);
        assert_true(t >= prev); /* one clock, in order */
        prev = t;
        n++;
    }
    fclose(f);
    assert_int_equal(n, 3);
    assert_int_equal(headers, 2); /* one per write: the flush and the exit */
}

#define LONG_RUN (2 * HOP_MAX + 5)
static void long_run(void)
{
    for (uint32_t i = 0; i < LONG_RUN; i++)
        hop_mark("y", i);
}

static void test_long_run(void **state)
{
    (void)state;
    assert_int_equal(in_child(dir, long_run), 0);
    int files;
    long marks;
    count(&files, &marks);
    assert_int_equal(files, 1);
    assert_int_equal(marks, LONG_RUN);
}

static void forks(void)
{
    hop_mark("parent", 0);
    pid_t pid = fork();
    if (pid == 0) {
        hop_mark("child", 0);
        exit(0); /* its own file: the parent's mark and its own */
    }
    waitpid(pid, NULL, 0);
}

static void test_fork(void **state)
{
    (void)state;
    assert_int_equal(in_child(dir, forks), 0);
    int files;
    long marks;
    count(&files, &marks);
    assert_int_equal(files, 2);
}

static void unwritable(void)
{
    hop_mark("z", 0);
    hop_flush();
}

static void test_unwritable(void **state)
{
    (void)state;
    char bad[128];
    snprintf(bad, sizeof bad, "%s/no/such/dir", dir);
    assert_int_equal(in_child(bad, unwritable), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_off, setup, teardown),
        cmocka_unit_test_setup_teardown(test_on, setup, teardown),
        cmocka_unit_test_setup_teardown(test_long_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fork, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unwritable, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
