/*
 * Runs a libFuzzer harness over inputs without libFuzzer: each argument is a file or a
 * directory of files, run in name order. How the normal build's ctest replays the committed
 * corpora (fuzz/corpus-NAME: seeds and every input that once found a defect) with any
 * compiler; a finding aborts, as under the fuzzer.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t ran;

static void run_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        perror(path);
        exit(2);
    }
    static uint8_t buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    /* A copy of exactly its size, so reading past the input is caught as under the fuzzer. */
    uint8_t *in = malloc(n ? n : 1);
    if (!in)
        exit(2);
    memcpy(in, buf, n);
    LLVMFuzzerTestOneInput(in, n);
    free(in);
    ran++;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
    LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        struct dirent **names;
        int n = scandir(argv[i], &names, NULL, by_name);
        if (n < 0) {
            run_file(argv[i]);
            continue;
        }
        for (int k = 0; k < n; k++) {
            if (names[k]->d_name[0] != '.') {
                char path[4096];
                snprintf(path, sizeof path, "%s/%s", argv[i], names[k]->d_name);
                run_file(path);
            }
            free(names[k]);
        }
        free(names);
    }
    printf("%s: %zu inputs, no finding\n", argv[0], ran);
    return 0;
}
