/*
 * The environment, as env_defs.h's table says: each variable read (SHMEM_NAME, else SMA_NAME),
 * parsed and checked by its kind, with the same message for every bad value; and SHMEM_INFO's
 * text, made from the same table.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "shmem_internal.h"

static const struct {
    const char *name, *dflt, *help;
    enum shm_env_kind kind;
    long long min, max;
    enum shm_env_who who;
} table[] = {
#define ROW(id, name, kind, dflt, min, max, who, help) { name, dflt, help, kind, min, max, who },
    SHM_ENV_TABLE(ROW)
#undef ROW
};

const char *shm_env_text(enum shm_env_id id)
{
    char name[64];
    for (int spelling = 0; spelling < 2; spelling++) {
        snprintf(name, sizeof name, "%s%s", spelling ? "SMA_" : "SHMEM_", table[id].name);
        const char *v = getenv(name);
        if (v && *v)
            return v;
    }
    return NULL;
}

/* A bad value: said the same way for every variable, and the program stops. */
static void bad(enum shm_env_id id, const char *v, const char *want)
{
    shm_fatal("SHMEM_%s=\"%s\": give %s", table[id].name, v, want);
}

long long shm_env_num_in(enum shm_env_id id, long long dflt, long long min, long long max)
{
    const char *v = shm_env_text(id);
    if (!v)
        return dflt;
    long long x;
    if (table[id].kind == SHM_KIND_SIZE) {
        size_t n;
        x = shm_parse_size(v, &n) ? min - 1 : (long long)n;
    } else {
        char *end;
        errno = 0;
        x = strtoll(v, &end, 10);
        if (errno || *end)
            x = min - 1;
    }
    if (x < min || x > max) {
        char want[128];
        snprintf(want, sizeof want, table[id].kind == SHM_KIND_SIZE
                                        ? "a size from %lld to %lld bytes (k/m/g/t suffixes: 64M, 3.1M)"
                                        : "a number from %lld to %lld", min, max);
        bad(id, v, want);
    }
    return x;
}

long long shm_env_num(enum shm_env_id id, long long dflt)
{
    return shm_env_num_in(id, dflt, table[id].min, table[id].max);
}

bool shm_env_flag(enum shm_env_id id)
{
    const char *v = shm_env_text(id);
    if (!v)
        return strcmp(table[id].dflt, "1") == 0;
    static const char *const on[] = { "1", "on", "yes", "true" }, *const off[] = { "0", "off", "no", "false" };
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(v, on[i]))
            return true;
        if (!strcasecmp(v, off[i]))
            return false;
    }
    bad(id, v, "on or off (1 or 0)");
    return false;
}

int shm_env_word(enum shm_env_id id)
{
    const char *v = shm_env_text(id);
    if (!v)
        return 0;
    const char *c = table[id].dflt;
    for (int i = 0; *c; i++) {
        size_t n = strcspn(c, "|");
        if (strlen(v) == n && !strncasecmp(v, c, n))
            return i;
        c += n + (c[n] == '|');
    }
    char want[128];
    snprintf(want, sizeof want, "one of %s", table[id].dflt);
    for (char *p = want; *p; p++)
        if (*p == '|')
            *p = '/';
    bad(id, v, want);
    return 0;
}

void shm_env_help(FILE *out)
{
    fprintf(out, "environment:\n");
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].who == SHM_FOR_USER) {
            /* The help, wrapped at 92 columns under its own start. */
            fprintf(out, "  SHMEM_%-18s ", table[i].name);
            const char *h = table[i].help;
            while (strlen(h) > 65) {
                int cut = 65;
                while (cut > 0 && h[cut] != ' ')
                    cut--;
                fprintf(out, "%.*s\n%27s", cut, h, "");
                h += cut + 1;
            }
            fprintf(out, "%s\n", h);
        }
    fprintf(out, "  set by oshrun:");
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].who == SHM_FOR_LAUNCHER)
            fprintf(out, " SHMEM_%s", table[i].name);
    fprintf(out, "\n  (SMA_* spellings are honoured too)\n");
}
