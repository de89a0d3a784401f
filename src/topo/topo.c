/*
 * Topology files: reads an INI topology with libinih, applies [defaults], resolves the names
 * that sections and cables use, and checks everything fab_create and route_build rely on.
 * Every problem is reported (not just the first) as "FILE:LINE: what is wrong; what to do".
 * Owns the contents of struct topo; knows nothing of shared memory. This file reads; the
 * checks that need the whole file are in topo_resolve.c.
 *
 * libinih hands the handler no line number and no call for a section without keys, so we feed
 * it through our own reader: it counts lines, strips indentation (which would otherwise turn a
 * line into a continuation of the previous value) and, after each "[...]" line, injects a
 * marker key so the handler learns where every section starts.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <ini.h>

#include "topo_int.h"

const struct keydef topo_keys[K_COUNT] = {
    [K_RAM] = { "ram", V_SIZE, SEC_BIT(SEC_DEFAULTS) | SEC_BIT(SEC_HOST), RAM_MIN, RAM_MAX, 512 * MiB,
                F_PAGE, "the first 1 MiB holds agent mailboxes and RAM ends below the MSI "
                        "region at 0xfee00000" },
    [K_IOMMU] = { "iommu", V_BOOL, SEC_BIT(SEC_DEFAULTS) | SEC_BIT(SEC_HOST), 0, 1, 0, 0, NULL },
    [K_LUT_SIZE] = { "lut_size", V_SIZE, ADAPTER_SECS, 4 * KiB, WINDOW_MAX, 4 * MiB, F_POW2,
                     "a LUT entry is a power of two of at least one 4 KiB page" },
    [K_LUT_ENTRIES] = { "lut_entries", V_NUM, ADAPTER_SECS, 1, 65536, 64, 0, NULL },
    [K_RID_ENTRIES] = { "rid_entries", V_NUM, ADAPTER_SECS, 3, 4096, 32, 0,
                        "each CPU takes 2 entries; a PXH830 has 32" },
    [K_DOORBELLS] = { "doorbells", V_NUM, ADAPTER_SECS, 2, TOPO_MAX_DB_BITS, 16, 0,
                      "the host agent reserves the top bit" },
    [K_SCRATCHPADS] = { "scratchpads", V_NUM, ADAPTER_SECS, 0, TOPO_MAX_SPADS, 8, 0, NULL },
    [K_DMA_CHANNELS] = { "dma_channels", V_NUM, ADAPTER_SECS, 0, TOPO_MAX_DMA_CHANNELS, 4, 0,
                         NULL },
    [K_NODE_ID] = { "node_id", V_NUM, SEC_BIT(SEC_HOST), 1, 65535, 0, 0, NULL },
    [K_ADAPTERS] = { "adapters", V_LIST, SEC_BIT(SEC_HOST), 0, 0, 0, 0, NULL },
    [K_PORTS] = { "ports", V_NUM, SEC_BIT(SEC_SWITCH), 2, 256, 0, 0, NULL },
    [K_SW_LATENCY] = { "latency_ns", V_NUM, SEC_BIT(SEC_SWITCH), 0, NS_MAX, 170, 0, NULL },
    [K_ENABLED] = { "enabled", V_BOOL, SEC_BIT(SEC_LATENCY), 0, 1, 0, 0, NULL },
    [K_NTB_NS] = { "ntb_ns", V_NUM, SEC_BIT(SEC_LATENCY), 0, NS_MAX, 360, 0, NULL },
    [K_ADAPTER_SWITCH_NS] = { "adapter_switch_ns", V_NUM, SEC_BIT(SEC_LATENCY), 0, NS_MAX, 50, 0,
                              NULL },
    [K_ROOT_NS] = { "root_ns", V_NUM, SEC_BIT(SEC_LATENCY), 0, NS_MAX, 100, 0, NULL },
    [K_DOORBELL_NS] = { "doorbell_ns", V_NUM, SEC_BIT(SEC_LATENCY), 0, NS_MAX, 500, 0, NULL },
    [K_MAX_READS] = { "max_read_requests", V_NUM, SEC_BIT(SEC_LATENCY), 1, 1024, 8, 0, NULL },
    [K_READ_BYTES] = { "read_request_bytes", V_SIZE, SEC_BIT(SEC_LATENCY), 128, 4096, 512, F_POW2,
                       "PCIe read requests are 128..4096 bytes, a power of two" },
    [K_LINK_MBPS] = { "link_mbps", V_NUM, SEC_BIT(SEC_LATENCY), 1, 1000000, 6000, 0, NULL },
    [K_DESCRIPTION] = { "description", V_TEXT, SEC_BIT(SEC_FABRIC), 0, 0, 0, 0, NULL },
    [K_HSW_LATENCY] = { "latency_ns", V_NUM, SEC_BIT(SEC_HOSTSWITCH), 0, NS_MAX, 132, 0, NULL },
    [K_LINK_NS] = { "link_ns", V_NUM, SEC_BIT(SEC_HOSTSWITCH), 0, NS_MAX, 0, 0, NULL },
    [K_CHASSIS] = { "chassis", V_BOOL, SEC_BIT(SEC_HOSTSWITCH), 0, 1, 0, 0, NULL },
    [K_IOTLB_HIT_NS] = { "iotlb_hit_ns", V_NUM, SEC_BIT(SEC_LATENCY), 0, NS_MAX, 20, 0, NULL },
    [K_PAGE_WALK_NS] = { "page_walk_ns", V_NUM, SEC_BIT(SEC_LATENCY), 0, NS_MAX, 330, 0, NULL },
    [K_ROOT_READ_BYTES] = { "root_read_bytes", V_SIZE, SEC_BIT(SEC_LATENCY), 64, 4096, 64, F_POW2, NULL },
    [K_ROOT_MAX_READS] = { "root_max_reads", V_NUM, SEC_BIT(SEC_LATENCY), 1, 4096, 16, 0, NULL },
};

static const struct {
    const char *kw;
    enum sec sec;
    bool named;
} sections[] = {
    { "fabric", SEC_FABRIC, false }, { "defaults", SEC_DEFAULTS, false },
    { "latency", SEC_LATENCY, false }, { "host", SEC_HOST, true },
    { "adapter", SEC_ADAPTER, true }, { "switch", SEC_SWITCH, true },
    { "links", SEC_LINKS, false }, { "device", SEC_DEVICE, true },
    { "hostswitch", SEC_HOSTSWITCH, true },
};

__attribute__((format(printf, 3, 4)))
void topo_perr(struct pstate *st, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(st->err, "%s:%d: ", st->path, line);
    va_start(ap, fmt);
    vfprintf(st->err, fmt, ap);
    va_end(ap);
    fputc('\n', st->err);
    st->nerr++;
}

void topo_limit_error(struct pstate *st, enum limit l)
{
    static const struct { const char *what; int max; const char *macro; } lim[L_COUNT] = {
        [L_HOSTS] = { "hosts", TOPO_MAX_HOSTS, "TOPO_MAX_HOSTS" },
        [L_ADAPTERS] = { "adapters", TOPO_MAX_ADAPTERS, "TOPO_MAX_ADAPTERS" },
        [L_SWITCHES] = { "switches", TOPO_MAX_SWITCHES, "TOPO_MAX_SWITCHES" },
        [L_LINKS] = { "links", TOPO_MAX_LINKS, "TOPO_MAX_LINKS" },
        [L_DEVICES] = { "devices", TOPO_MAX_DEVICES, "TOPO_MAX_DEVICES" },
        [L_HSWITCHES] = { "in-host switches", TOPO_MAX_HSWITCHES, "TOPO_MAX_HSWITCHES" },
    };
    if (st->limit_hit[l])
        return; /* once is enough */
    st->limit_hit[l] = true;
    topo_perr(st, st->line, "more than %d %s (%s); describe a smaller fabric", lim[l].max,
         lim[l].what, lim[l].macro);
}

/* ---- small parsers ---- */

static bool parse_u64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (!*s)
        return false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

int topo_parse_size(const char *s, uint64_t *out)
{
    if (!s || !out)
        return -EINVAL;
    size_t n = strlen(s);
    unsigned shift = 0;
    if (n > 0) {
        switch (s[n - 1]) {
        case 'k': case 'K': shift = 10; break;
        case 'm': case 'M': shift = 20; break;
        case 'g': case 'G': shift = 30; break;
        case 't': case 'T': shift = 40; break;
        default: break;
        }
    }
    if (shift)
        n--;
    char num[32];
    if (n == 0 || n >= sizeof num)
        return -EINVAL;
    memcpy(num, s, n);
    num[n] = '\0';
    uint64_t v;
    if (!parse_u64(num, &v) || v > (UINT64_MAX >> shift))
        return -EINVAL;
    *out = v << shift;
    return 0;
}

static bool parse_bool(const char *s, uint64_t *out)
{
    static const char *const yes[] = { "on", "yes", "true", "1" };
    static const char *const no[] = { "off", "no", "false", "0" };
    for (size_t i = 0; i < 4; i++) {
        if (!strcasecmp(s, yes[i]))
            return *out = 1, true;
        if (!strcasecmp(s, no[i]))
            return *out = 0, true;
    }
    return false;
}

/* "2 MiB", "4 KiB", "4078 MiB", "100 bytes": sizes as people read them. */
const char *topo_fmt_size(uint64_t v, char *buf, size_t len)
{
    static const char *const unit[] = { "bytes", "KiB", "MiB", "GiB", "TiB" };
    unsigned u = 0;
    while (u < 4 && v && v % 1024 == 0) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, "%" PRIu64 " %s", v, unit[u]);
    return buf;
}

/* Names are what links, the CLI and shared-memory paths use: keep them plain. */
bool topo_valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= TOPO_NAME_MAX)
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-')
            return false;
    return true;
}
#define NAME_RULE "use 1..31 letters, digits, '_' or '-'"

void topo_copy_name(char dst[TOPO_NAME_MAX], const char *src)
{
    size_t n = strnlen(src, TOPO_NAME_MAX - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* Split "HOST.NAME" into its valid parts; false if it is not one. */
static bool split_adapter(const char *q, char host[TOPO_NAME_MAX], char name[TOPO_NAME_MAX])
{
    const char *dot = strchr(q, '.');
    if (!dot || strlen(q) >= TOPO_NAME_MAX || (size_t)(dot - q) >= TOPO_NAME_MAX)
        return false;
    memcpy(host, q, (size_t)(dot - q));
    host[dot - q] = '\0';
    topo_copy_name(name, dot + 1);
    return topo_valid_name(host) && topo_valid_name(name);
}

/* ---- values ---- */

static const char *hash_hint(const char *v)
{
    return strchr(v, '#') ? " ('#' starts a comment only at the start of a line; after a "
                            "value use ' ;')"
                          : "";
}

/* Parse and range-check value v of key k. false (after a message) when it is not valid. */
static bool parse_value(struct pstate *st, enum key k, const char *v, uint64_t *out)
{
    const struct keydef *d = &topo_keys[k];
    char lo[32], hi[32];
    uint64_t x;
    switch (d->kind) {
    case V_BOOL:
        if (!parse_bool(v, out)) {
            topo_perr(st, st->line, "%s = '%s' is not a yes/no value; use on|off, yes|no, "
                 "true|false or 1|0%s", d->name, v, hash_hint(v));
            return false;
        }
        return true;
    case V_SIZE:
        if (topo_parse_size(v, &x) < 0) {
            topo_perr(st, st->line, "%s = '%s' is not a size; write bytes, or a number with a k, M, "
                 "G or T suffix (powers of 1024), e.g. 512M%s", d->name, v, hash_hint(v));
            return false;
        }
        if (x < d->min || x > d->max) {
            topo_perr(st, st->line, "%s = %s is out of range; use %s..%s%s%s%s", d->name, v,
                 topo_fmt_size(d->min, lo, sizeof lo), topo_fmt_size(d->max, hi, sizeof hi),
                 d->why ? " (" : "", d->why ? d->why : "", d->why ? ")" : "");
            return false;
        }
        break;
    case V_NUM:
        if (!parse_u64(v, &x)) {
            topo_perr(st, st->line, "%s = '%s' is not a whole number; use %" PRIu64 "..%" PRIu64
                 "%s", d->name, v, d->min, d->max, hash_hint(v));
            return false;
        }
        if (x < d->min || x > d->max) {
            topo_perr(st, st->line, "%s = %s is out of range; use %" PRIu64 "..%" PRIu64 "%s%s%s",
                 d->name, v, d->min, d->max, d->why ? " (" : "", d->why ? d->why : "",
                 d->why ? ")" : "");
            return false;
        }
        break;
    default:
        return false;
    }
    if ((d->flags & F_POW2) && (x & (x - 1))) {
        topo_perr(st, st->line, "%s = %s is not a power of two; use e.g. %s", d->name, v,
             topo_fmt_size(d->def, lo, sizeof lo));
        return false;
    }
    if ((d->flags & F_PAGE) && x % (4 * KiB)) {
        topo_perr(st, st->line, "%s = %s is not a multiple of 4 KiB; round it to whole pages, "
             "e.g. %s", d->name, v, topo_fmt_size((x + 4 * KiB - 1) & ~(4 * KiB - 1), lo, sizeof lo));
        return false;
    }
    *out = x;
    return true;
}

/* "a, b, c" for the keys allowed in section s. */
static const char *allowed_keys(enum sec s, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int k = 0; k < K_COUNT && n < len; k++)
        if (topo_keys[k].sections & SEC_BIT(s))
            n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? ", " : "",
                                  topo_keys[k].name);
    return buf;
}

/* ---- sections ---- */

static void host_adapters(struct pstate *st, const char *value)
{
    int first = (int)st->nlists;
    const char *p = value;
    if (!*p)
        return; /* "adapters =" with nothing: no adapters */
    for (;;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char item[256];
        while (n && isspace((unsigned char)*p))
            p++, n--;
        while (n && isspace((unsigned char)p[n - 1]))
            n--;
        if (n >= sizeof item)
            n = sizeof item - 1;
        memcpy(item, p, n);
        item[n] = '\0';
        const char *host = st->t->hosts[st->cur].name;
        if (!*item) {
            topo_perr(st, st->line, "empty name in the adapters list; separate names by single "
                 "commas, e.g. adapters = ntb0, ntb1");
        } else if (!topo_valid_name(item)) {
            topo_perr(st, st->line, "adapter name '%s' in the adapters list is not valid; %s, "
                 "separated by commas", item, NAME_RULE);
        } else if (strlen(host) + 1 + n >= TOPO_NAME_MAX) {
            topo_perr(st, st->line, "adapter name '%s.%s' is longer than %d characters; shorten the "
                 "host or adapter name", host, item, TOPO_NAME_MAX - 1);
        } else {
            bool dup = false;
            for (uint32_t i = (uint32_t)first; i < st->nlists; i++)
                dup |= !strcmp(st->lists[i].name, item);
            if (dup) {
                topo_perr(st, st->line, "adapter '%s' is listed twice; list each adapter once", item);
            } else if (st->nlists >= TOPO_MAX_ADAPTERS) {
                topo_limit_error(st, L_ADAPTERS);
            } else {
                struct list_adapter *la = &st->lists[st->nlists++];
                la->host = (uint32_t)st->cur;
                topo_copy_name(la->name, item);
                la->line = st->line;
            }
        }
        if (!end)
            break;
        p = end + 1;
    }
}

void topo_section_key(struct pstate *st, const char *name, const char *value)
{
    int k;
    for (k = 0; k < K_COUNT; k++)
        if ((topo_keys[k].sections & SEC_BIT(st->sec)) && !strcmp(topo_keys[k].name, name))
            break;
    if (k == K_COUNT) {
        char buf[256];
        topo_perr(st, st->line, "unknown key '%s' in [%s]; allowed keys: %s", name, st->title,
             allowed_keys(st->sec, buf, sizeof buf));
        return;
    }
    struct vals *v = st->v;
    if (v->line[k]) {
        topo_perr(st, st->line, "'%s' is already set at line %d; keep one of them", name, v->line[k]);
        return;
    }
    v->line[k] = st->line;
    if (topo_keys[k].kind == V_TEXT)
        return; /* [fabric] description: for people, not kept */
    if (topo_keys[k].kind == V_LIST) {
        if (st->cur >= 0)
            host_adapters(st, value);
        return;
    }
    if (parse_value(st, (enum key)k, value, &v->v[k]))
        v->ok |= 1ull << k;
}

static void device_key(struct pstate *st, const char *name, const char *value)
{
    struct topo_device *d = st->cur >= 0 ? &st->t->devices[st->cur] : NULL;
    bool is_host = !strcmp(name, "host");
    if (is_host || !strcmp(name, "type")) {
        int *line = d ? (is_host ? &st->dev_host_line[st->cur] : &st->dev_type_line[st->cur])
                      : NULL; /* NULL: a duplicate or surplus device, checked but not kept */
        if (line && *line) {
            topo_perr(st, st->line, "'%s' is already set at line %d; keep one of them", name, *line);
            return;
        }
        if (line)
            *line = st->line; /* set, even if invalid: "has no host" would mislead */
        if (!topo_valid_name(value))
            topo_perr(st, st->line, "%s = '%s' is not a valid name; %s", name, value, NAME_RULE);
        else if (d)
            topo_copy_name(is_host ? st->dev_host[st->cur] : d->type, value);
        return;
    }
    /* Everything else belongs to the device model: keep it verbatim as "key=value;". */
    bool ok = *name != '\0';
    for (const char *p = name; *p; p++)
        ok &= isalnum((unsigned char)*p) || *p == '_' || *p == '-' || *p == '.';
    if (!ok) {
        topo_perr(st, st->line, "device parameter '%s' is not a valid key; use letters, digits, "
             "'_', '-' or '.'", name);
        return;
    }
    if (strchr(value, ';')) {
        topo_perr(st, st->line, "device parameter %s = '%s' contains ';'; parameters are stored "
             "';'-separated, so leave it out", name, value);
        return;
    }
    if (!d)
        return;
    size_t nl = strlen(name);
    for (const char *p = d->params; *p; p = strchr(p, ';') + 1)
        if (!strncmp(p, name, nl) && p[nl] == '=') {
            topo_perr(st, st->line, "device parameter '%s' is already set in [%s]; keep one of them",
                 name, st->title);
            return;
        }
    size_t used = strlen(d->params), add = nl + strlen(value) + 2;
    if (used + add >= sizeof d->params) {
        topo_perr(st, st->line, "the parameters of [%s] exceed %zu characters; shorten them",
             st->title, sizeof d->params - 1);
        return;
    }
    snprintf(d->params + used, sizeof d->params - used, "%s=%s;", name, value);
}

static void add_link(struct pstate *st, const char *a, const char *b)
{
    if (!*a || !*b) {
        topo_perr(st, st->line, "a cable needs two ends; write END = END, e.g. a.ntb0 = b.ntb0 or "
             "a.ntb0 = sw0");
        return;
    }
    bool ok = true;
    const char *ends[2] = { a, b };
    for (int i = 0; i < 2; i++)
        if (strlen(ends[i]) >= TOPO_NAME_MAX) {
            topo_perr(st, st->line, "no adapter or switch named '%s' (names have at most %d "
                 "characters); fix the name", ends[i], TOPO_NAME_MAX - 1);
            ok = false;
        }
    if (!ok)
        return;
    if (st->nrl >= TOPO_MAX_LINKS) {
        topo_limit_error(st, L_LINKS);
        return;
    }
    struct raw_link *l = &st->rl[st->nrl++];
    topo_copy_name(l->a, a);
    topo_copy_name(l->b, b);
    l->line = st->line;
}

/* A named section: validate the name, refuse duplicates and overflow, allocate a slot. */
static void begin_named(struct pstate *st, enum sec s, const char *name)
{
    struct topo *t = st->t;
    st->cur = -1;
    st->v = &st->scratch;
    memset(&st->scratch, 0, sizeof st->scratch);
    if (s == SEC_ADAPTER) {
        char host[TOPO_NAME_MAX], an[TOPO_NAME_MAX];
        if (!split_adapter(name, host, an)) {
            topo_perr(st, st->line, "adapter section name '%s' is not HOST.NAME; write e.g. "
                 "[adapter a.ntb1] (%s in each part, at most %d in all)", name, NAME_RULE,
                 TOPO_NAME_MAX - 1);
            return;
        }
        for (uint32_t i = 0; i < st->nsects; i++)
            if (!strcmp(st->sects[i].host, host) && !strcmp(st->sects[i].name, an)) {
                topo_perr(st, st->line, "adapter %s is already declared at line %d; give each "
                     "adapter one [adapter] section", name, st->sects[i].line);
                return;
            }
        if (st->nsects >= TOPO_MAX_ADAPTERS) {
            topo_limit_error(st, L_ADAPTERS);
            return;
        }
        struct sect_adapter *sa = &st->sects[st->nsects];
        st->cur = (int)st->nsects++;
        topo_copy_name(sa->host, host);
        topo_copy_name(sa->name, an);
        sa->line = st->line;
        st->v = &sa->p;
        return;
    }
    static const char *const what[SEC_COUNT] = { [SEC_HOST] = "host", [SEC_SWITCH] = "switch",
                                                 [SEC_DEVICE] = "device" };
    if (!topo_valid_name(name)) {
        topo_perr(st, st->line, "%s name '%s' is not valid; %s", what[s], name, NAME_RULE);
        return;
    }
    int prev = s == SEC_HOST ? topo_host_by_name(t, name)
             : s == SEC_SWITCH ? topo_switch_by_name(t, name) : -1;
    if (s == SEC_DEVICE)
        for (uint32_t i = 0; i < t->ndevices; i++)
            if (!strcmp(t->devices[i].name, name))
                prev = (int)i;
    if (prev >= 0) {
        int pl = s == SEC_HOST ? t->hosts[prev].line
               : s == SEC_SWITCH ? t->switches[prev].line : t->devices[prev].line;
        topo_perr(st, st->line, "%s %s is already declared at line %d; give each %s a unique name",
             what[s], name, pl, what[s]);
        return;
    }
    switch (s) {
    case SEC_HOST:
        if (t->nhosts >= TOPO_MAX_HOSTS) {
            topo_limit_error(st, L_HOSTS);
            return;
        }
        st->cur = (int)t->nhosts++;
        topo_copy_name(t->hosts[st->cur].name, name);
        t->hosts[st->cur].line = st->line;
        st->v = &st->host_v[st->cur];
        break;
    case SEC_SWITCH:
        if (t->nswitches >= TOPO_MAX_SWITCHES) {
            topo_limit_error(st, L_SWITCHES);
            return;
        }
        st->cur = (int)t->nswitches++;
        topo_copy_name(t->switches[st->cur].name, name);
        t->switches[st->cur].line = st->line;
        st->v = &st->sw_v[st->cur];
        break;
    default: /* SEC_DEVICE */
        if (t->ndevices >= TOPO_MAX_DEVICES) {
            topo_limit_error(st, L_DEVICES);
            return;
        }
        st->cur = (int)t->ndevices++;
        topo_copy_name(t->devices[st->cur].name, name);
        t->devices[st->cur].line = st->line;
        break;
    }
}

static void trim_copy(char *dst, size_t len, const char *src)
{
    while (isspace((unsigned char)*src))
        src++;
    size_t n = strlen(src);
    while (n && isspace((unsigned char)src[n - 1]))
        n--;
    if (n >= len)
        n = len - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* The marker after a "[...]" line: `section` is what inih parsed, `expect` what we saw. */
static void begin_section(struct pstate *st, const char *section, const char *expect)
{
    char title[64];
    st->sec = SEC_BAD;
    if (!strcmp(expect, MARK_BAD))
        return;
    trim_copy(title, sizeof title, section);
    if (strcmp(title, expect)) {
        /* inih kept the previous section: a ';' inside the brackets, or a very long name */
        topo_perr(st, st->line, "cannot read this section header; write [KIND NAME] with no ';' "
             "inside the brackets and names of at most %d characters", TOPO_NAME_MAX - 1);
        return;
    }
    snprintf(st->title, sizeof st->title, "%s", title);
    size_t kl = strcspn(title, " \t");
    const char *name = title + kl;
    while (isspace((unsigned char)*name))
        name++;
    size_t i;
    for (i = 0; i < sizeof sections / sizeof sections[0]; i++)
        if (strlen(sections[i].kw) == kl && !strncmp(sections[i].kw, title, kl))
            break;
    if (i == sizeof sections / sizeof sections[0]) {
        topo_perr(st, st->line, "unknown section [%s]; sections are " SECTION_LIST, title);
        return;
    }
    enum sec s = sections[i].sec;
    const char *kw = sections[i].kw;
    if (sections[i].named && !*name) {
        topo_perr(st, st->line, "[%s] needs a name; write [%s %s]", kw, kw,
             s == SEC_ADAPTER ? "HOST.NAME" : "NAME");
        return;
    }
    if (!sections[i].named && *name) {
        topo_perr(st, st->line, "[%s] takes no name; write [%s]", title, kw);
        return;
    }
    st->sec = s;
    st->cur = -1;
    switch (s) {
    case SEC_FABRIC: case SEC_DEFAULTS: case SEC_LATENCY:
        if (st->single_line[s]) {
            topo_perr(st, st->line, "section [%s] already appears at line %d; merge the two", kw,
                 st->single_line[s]);
            memset(&st->scratch, 0, sizeof st->scratch);
            st->v = &st->scratch;
        } else {
            st->single_line[s] = st->line;
            st->v = &st->single[s];
        }
        break;
    case SEC_LINKS: /* may appear more than once: cables are a list */
        break;
    case SEC_HOSTSWITCH:
        topo_hswitch_begin(st, name);
        break;
    default:
        begin_named(st, s, name);
        break;
    }
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
    struct pstate *st = user;
    st->called = true;
    if (!strcmp(name, MARK_KEY)) {
        begin_section(st, section, value);
        return 1;
    }
    switch (st->sec) {
    case SEC_NONE:
        topo_perr(st, st->line, "'%s' is outside any section; put it under a [section] header", name);
        break;
    case SEC_BAD:
        break; /* the header was reported */
    case SEC_LINKS:
        add_link(st, name, value);
        break;
    case SEC_DEVICE:
        device_key(st, name, value);
        break;
    case SEC_HOSTSWITCH:
        topo_hswitch_key(st, name, value);
        break;
    default:
        topo_section_key(st, name, value);
        break;
    }
    return 1; /* we report errors ourselves; inih only reports the first */
}

/* ---- reader ---- */

/* A line with content that inih did not hand to us is a syntax error. */
static void check_unhandled(struct pstate *st)
{
    if (!st->content || st->called)
        return;
    if (st->header)
        topo_perr(st, st->line, "section header has no closing ']'; write [KIND NAME]");
    else
        topo_perr(st, st->line, "expected KEY = VALUE, a [section] header or a comment ('#' or ';' "
             "at the start of the line)");
    st->content = false;
}

static char *reader(char *str, int num, void *stream)
{
    struct pstate *st = stream;
    if (st->marker_pending) {
        st->marker_pending = false;
        snprintf(str, (size_t)num, "%s", st->marker);
        return str;
    }
    check_unhandled(st);
    errno = 0;
    ssize_t n = getline(&st->buf, &st->cap, st->in);
    if (n < 0) {
        if (ferror(st->in))
            st->read_errno = errno ? errno : EIO;
        return NULL;
    }
    st->line++;
    char *p = st->buf;
    if (st->line == 1 && !strncmp(p, "\xef\xbb\xbf", 3))
        p += 3; /* UTF-8 BOM */
    while (*p == ' ' || *p == '\t')
        p++;    /* indentation is allowed and never means "continuation" */
    st->called = false;
    st->header = *p == '[';
    st->content = *p && *p != '\n' && *p != '\r' && *p != ';' && *p != '#';
    size_t len = strcspn(p, "\r\n"); /* inih needs room for "\r\n" and the NUL */
    if (len + 3 > (size_t)num || strlen(p) + 1 > (size_t)num) {
        topo_perr(st, st->line, "line is longer than %d characters; shorten it", num - 3);
        st->content = false;
        if (st->header) { /* keep its keys out of the previous section */
            snprintf(st->marker, sizeof st->marker, "%s=%s\n", MARK_KEY, MARK_BAD);
            st->marker_pending = true;
        }
        snprintf(str, (size_t)num, "\n");
        return str;
    }
    if (st->header) {
        const char *close = strchr(p, ']');
        if (!close) { /* inih would keep the previous section: keep its keys out of it */
            topo_perr(st, st->line, "section header has no closing ']'; write [KIND NAME]");
            snprintf(st->marker, sizeof st->marker, "%s=%s\n", MARK_KEY, MARK_BAD);
            st->marker_pending = true;
        } else {
            char name[256];
            size_t nl = (size_t)(close - p - 1);
            if (nl >= sizeof name) /* only with a larger inih line buffer: will mismatch */
                nl = sizeof name - 1;
            memcpy(name, p + 1, nl);
            name[nl] = '\0';
            char t[256];
            trim_copy(t, sizeof t, name);
            snprintf(st->marker, sizeof st->marker, "%s=%s\n", MARK_KEY, t[0] ? t : MARK_BAD);
            if (!t[0]) /* "[]" */
                topo_perr(st, st->line, "empty section header; write [KIND NAME]");
            st->marker_pending = true;
        }
    }
    memcpy(str, p, strlen(p) + 1);
    return str;
}

/* ---- public ---- */

int topo_load(const char *path, struct topo *t, FILE *err)
{
    if (!path || !t)
        return -EINVAL;
    if (!err)
        err = stderr;
    memset(t, 0, sizeof *t);
    snprintf(t->path, sizeof t->path, "%s", path);
    FILE *in = fopen(path, "r");
    if (!in) {
        int e = errno;
        fprintf(err, "%s: cannot open the topology file: %s; check the path\n", path,
                strerror(e));
        return -e;
    }
    struct pstate *st = calloc(1, sizeof *st);
    if (!st) {
        fclose(in);
        return -ENOMEM;
    }
    st->t = t;
    st->err = err;
    st->in = in;
    st->path = path;
    st->sec = SEC_NONE;

    int rc = ini_parse_stream(reader, st, handler, st);
    if (rc == -2) {
        fprintf(err, "%s: out of memory while reading\n", path);
        rc = -ENOMEM;
        goto out;
    }
    if (st->read_errno) {
        fprintf(err, "%s: cannot read the topology file: %s; check the path\n", path,
                strerror(st->read_errno));
        rc = -st->read_errno;
        goto out;
    }
    if (rc > 0 && st->nerr == 0) /* a syntax error we did not see: still refuse the file */
        topo_perr(st, st->line, "libinih cannot parse this file; check its syntax");

    topo_resolve(st);
    if (t->nhosts == 0)
        topo_perr(st, 1, "no hosts; declare at least one [host NAME] with a node_id");
    rc = st->nerr ? -EINVAL : 0;
out:
    free(st->buf);
    free(st);
    fclose(in);
    return rc;
}

int topo_host_by_name(const struct topo *t, const char *name)
{
    if (!t || !name)
        return -1;
    for (uint32_t i = 0; i < t->nhosts; i++)
        if (!strcmp(t->hosts[i].name, name))
            return (int)i;
    return -1;
}

int topo_adapter_by_name(const struct topo *t, const char *qualified)
{
    if (!t || !qualified)
        return -1;
    for (uint32_t i = 0; i < t->nadapters; i++)
        if (!strcmp(t->adapters[i].name, qualified))
            return (int)i;
    return -1;
}

int topo_switch_by_name(const struct topo *t, const char *name)
{
    if (!t || !name)
        return -1;
    for (uint32_t i = 0; i < t->nswitches; i++)
        if (!strcmp(t->switches[i].name, name))
            return (int)i;
    return -1;
}
