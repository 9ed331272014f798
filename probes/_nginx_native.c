/*
 * inferfit.probes._nginx_native: the per-line work of nginx_agg, in C.
 *
 * Optional accelerator for aggregation in the console's own process (a local
 * target, or a box without python3 whose lines are streamed back). The box
 * script stays pure Python. Equivalence with the Python fast path is the
 * contract: this module cuts each line exactly as LogFormat.parse_block does
 * (the plan comes from Python), and every line it cannot place, or whose value
 * Python's checks refuse, goes back to Python to be parsed by the reference.
 *
 * Flow per chunk (complete lines joined by "\n", retry lists already folded):
 *   scan(chunk)   -> the distinct raw values this scanner has not seen, per field
 *   learn(f, ids) -> Python's verdict for each: an int (the epoch second for the
 *                    time, a route id for the request, the decoded time for request
 *                    and upstream times, an index into Python's list for statuses),
 *                    or None (a bad value: its lines go to the reference parser)
 *   commit()      -> the chunk's totals, per-second counts, and rejected lines
 * Lines whose values are all known are counted during scan(). Joint counts
 * (route, status, upstream status) and (route, request time, upstream time)
 * accumulate here across chunks and go to Python with flush(). Memory is bounded:
 * scan() returns None when a value table could fill; Python flushes and resets.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { CAP_REQ0, CAP_REQ1, CAP_STATUS, CAP_RT, CAP_UT, CAP_US, CAP_TIME, CAP_ZONE, CAP_BYTES,
       NCAP };
enum { F_REQ, F_STATUS, F_RT, F_UT, F_US, F_TIME, NFIELD };
enum { SEG_RAW, SEG_LIT, SEG_TOK };
enum { ST_PENDING, ST_GOOD, ST_BAD };
/* what scan() decided about a line; commit() settles the waiting ones */
enum { LINE_REJECTED, LINE_WAITING, LINE_SETTLED };

#define MAX_TOKENS 256
#define TABLE_CAP (1 << 16)   /* distinct values per field before Python must reset */
#define MAX_DIGITS 18          /* longer byte counts go to Python (big ints) */
#define VIRTUAL_MAX 512

typedef struct { const char *p; Py_ssize_t n; } span;

typedef struct {
    char *pre; Py_ssize_t npre;
    char *suf; Py_ssize_t nsuf;
    int literal;   /* the token must equal pre */
    int cap;       /* capture slot, or -1 */
} tokspec;

typedef struct {
    int kind;
    int cap;                 /* SEG_RAW */
    char *lit; Py_ssize_t nlit;  /* SEG_LIT */
    int ntok; tokspec *toks;     /* SEG_TOK */
} segspec;

/* -- a value table: distinct raw values of one field (1 or 2 spans) ------- */
/* 32 bytes: an arena offset under 4 GiB and lengths under 2 GiB (scan() checks room) */
typedef struct {
    uint64_t hash;
    int64_t value;
    uint32_t off;
    int32_t n1, n2;
    int32_t state;
} entry;

typedef struct {
    uint64_t *slots;         /* (hash >> 32) << 32 | (index into entries + 1); 0 empty */
    Py_ssize_t nslots;
    entry *entries;
    Py_ssize_t nentries, centries;
    char *arena;
    Py_ssize_t narena, carena;
    Py_ssize_t *pending;     /* entries awaiting learn(), in first-seen order */
    Py_ssize_t npending, cpending;
} vtable;

/* -- joint counts ----------------------------------------------------------- */
typedef struct secslot { int64_t sec, count, bytes; int used; } secslot;

/* Joint counts of three ids (< TABLE_CAP): (route, status, upstream status) and
 * (route, request time, upstream time), apart so that many distinct times do not
 * multiply with statuses. 24 bytes an entry. */
typedef struct { int32_t key[3]; int32_t used; int64_t count; } jentry;
typedef struct { jentry *slots; Py_ssize_t nslots, n; } jtable;

typedef struct {
    PyObject_HEAD
    int q;
    int nseg;
    segspec *segs;
    int cap1[NFIELD], cap2[NFIELD];   /* capture slots per field (-1: none) */
    int msec_trim;
    int routes;              /* key F_REQ by route ("R...") where C can name it, else "Q" + raw */
    int fold;                /* ", " -> "," before cutting (retry lists are one token) */
    char *folded;
    Py_ssize_t cfolded;
    const char *data;        /* the scanned chunk's bytes (its own or ``folded``) */
    int has_bytes;
    Py_ssize_t bytes_npre, bytes_nsuf, time_npre, time_nsuf, zone_npre, zone_nsuf;
    int time_kind;
    Py_ssize_t table_cap;    /* distinct values per table (TABLE_CAP; smaller in tests) */
    int has_lo, has_hi;
    int64_t lo, hi;
    vtable tables[NFIELD];
    vtable requests;         /* raw $request -> its F_REQ entry (routes mode): one route_key each */
    int64_t overflow;        /* >= 0: every route named in C and not yet known gets this id */
    jtable by_status, by_time;
    /* the chunk being scanned */
    Py_buffer view;          /* held from scan() to commit() */
    int scanned;
    Py_ssize_t nlines, clines;
    int32_t *line_entry;     /* nlines * NFIELD entry indices (-1: field absent) */
    span last_a[NFIELD], last_b[NFIELD];  /* the previous line's values: most repeat */
    /* the chunk's totals so far (settled lines) */
    int64_t c_lines, c_outside, c_bytes, c_bytes_n;
    struct secslot *secs;    /* requests and bytes per second */
    Py_ssize_t nsecs, nsecs_used;
    Py_ssize_t last_e[NFIELD];
    int64_t *line_bytes;
    Py_ssize_t *line_start, *line_end;
    char *line_ok;
} Scanner;

static uint64_t hash_bytes(const char *p, Py_ssize_t n, uint64_t h) {
    h ^= (uint64_t)n * 0x9E3779B97F4A7C15ULL;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
        p += 8; n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, (size_t)n);
    h = (h ^ w ^ ((uint64_t)n << 56)) * 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 29;
    return h;
}

static int vt_init(vtable *t) {
    memset(t, 0, sizeof(*t));
    t->nslots = 1024;
    t->slots = PyMem_RawCalloc((size_t)t->nslots, sizeof(uint64_t));
    return t->slots ? 0 : -1;
}

static void vt_free(vtable *t) {
    PyMem_RawFree(t->slots);
    PyMem_RawFree(t->entries);
    PyMem_RawFree(t->arena);
    PyMem_RawFree(t->pending);
    memset(t, 0, sizeof(*t));
}

static int vt_clear(vtable *t) {
    vt_free(t);
    return vt_init(t);
}

static int grow(void **buf, Py_ssize_t *cap, Py_ssize_t need, size_t item) {
    if (need <= *cap)
        return 0;
    Py_ssize_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *nb = PyMem_RawRealloc(*buf, (size_t)c * item);
    if (!nb)
        return -1;
    *buf = nb;
    *cap = c;
    return 0;
}

static int vt_rehash(vtable *t) {
    Py_ssize_t ns = t->nslots * 2;
    uint64_t *slots = PyMem_RawCalloc((size_t)ns, sizeof(uint64_t));
    if (!slots)
        return -1;
    for (Py_ssize_t i = 0; i < t->nentries; i++) {
        uint64_t h = t->entries[i].hash;
        Py_ssize_t s = (Py_ssize_t)(h & (uint64_t)(ns - 1));
        while (slots[s])
            s = (s + 1) & (ns - 1);
        slots[s] = (h & 0xFFFFFFFF00000000ULL) | (uint64_t)(i + 1);
    }
    PyMem_RawFree(t->slots);
    t->slots = slots;
    t->nslots = ns;
    return 0;
}

/* The entry for (a, b): found, or added as pending. -1 on memory error, -2 when full. */
static Py_ssize_t vt_lookup(vtable *t, span a, span b, Py_ssize_t cap) {
    uint64_t h = hash_bytes(a.p, a.n, 0x243F6A8885A308D3ULL);
    if (b.p)
        h = hash_bytes(b.p, b.n, h);
    Py_ssize_t mask = t->nslots - 1;
    Py_ssize_t s = (Py_ssize_t)(h & (uint64_t)mask);
    uint64_t tag = h & 0xFFFFFFFF00000000ULL;
    for (;;) {
        uint64_t slot = t->slots[s];
        if (!slot)
            break;
        Py_ssize_t e = (Py_ssize_t)(slot & 0xFFFFFFFFULL);
        if ((slot & 0xFFFFFFFF00000000ULL) != tag) {
            s = (s + 1) & mask;
            continue;
        }
        entry *en = &t->entries[e - 1];
        if (en->hash == h && en->n1 == a.n && en->n2 == b.n &&
            memcmp(t->arena + en->off, a.p, (size_t)a.n) == 0 &&
            (b.n == 0 || memcmp(t->arena + en->off + a.n, b.p, (size_t)b.n) == 0))
            return e - 1;
        s = (s + 1) & mask;
    }
    if (t->nentries >= cap)
        return -2;
    if (grow((void **)&t->entries, &t->centries, t->nentries + 1, sizeof(entry)) < 0 ||
        grow((void **)&t->arena, &t->carena, t->narena + a.n + b.n + 1, 1) < 0 ||
        grow((void **)&t->pending, &t->cpending, t->npending + 1, sizeof(Py_ssize_t)) < 0)
        return -1;
    Py_ssize_t idx = t->nentries++;
    entry *en = &t->entries[idx];
    en->hash = h;
    en->off = (uint32_t)t->narena;
    en->n1 = (int32_t)a.n;
    en->n2 = (int32_t)b.n;
    en->value = 0;
    en->state = ST_PENDING;
    memcpy(t->arena + t->narena, a.p, (size_t)a.n);
    if (b.n)
        memcpy(t->arena + t->narena + a.n, b.p, (size_t)b.n);
    t->narena += a.n + b.n;
    t->slots[s] = tag | (uint64_t)(idx + 1);
    t->pending[t->npending++] = idx;
    if (t->nentries * 2 > t->nslots && vt_rehash(t) < 0)
        return -1;
    return idx;
}

/* -- joint table ------------------------------------------------------------- */
static uint64_t hash_key(const int32_t *k) {
    uint64_t h = 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i < 3; i++) {
        h = (h ^ (uint32_t)k[i]) * 0xff51afd7ed558ccdULL;
        h ^= h >> 31;
    }
    return h;
}

static int joint_add(jtable *t, const int32_t *k, int64_t c) {
    if ((t->n + 1) * 2 > t->nslots) {
        Py_ssize_t ns = t->nslots ? t->nslots * 2 : 4096;
        jentry *nj = PyMem_RawCalloc((size_t)ns, sizeof(jentry));
        if (!nj)
            return -1;
        for (Py_ssize_t i = 0; i < t->nslots; i++) {
            if (!t->slots[i].used)
                continue;
            Py_ssize_t p = (Py_ssize_t)(hash_key(t->slots[i].key) & (uint64_t)(ns - 1));
            while (nj[p].used)
                p = (p + 1) & (ns - 1);
            nj[p] = t->slots[i];
        }
        PyMem_RawFree(t->slots);
        t->slots = nj;
        t->nslots = ns;
    }
    Py_ssize_t mask = t->nslots - 1;
    Py_ssize_t p = (Py_ssize_t)(hash_key(k) & (uint64_t)mask);
    while (t->slots[p].used) {
        const int32_t *e = t->slots[p].key;
        if (e[0] == k[0] && e[1] == k[1] && e[2] == k[2]) {
            t->slots[p].count += c;
            return 0;
        }
        p = (p + 1) & mask;
    }
    memcpy(t->slots[p].key, k, sizeof(int32_t) * 3);
    t->slots[p].count = c;
    t->slots[p].used = 1;
    t->n++;
    return 0;
}

/* The table's counts as [((id, id, id), count)], and empty it. With ``s`` (the times
 * table) the 2nd and 3rd ids are entries of F_RT / F_UT, given as their learned value
 * (-1 where the field is absent). */
static PyObject *joint_take(jtable *t, Scanner *s) {
    PyObject *out = PyList_New(0);
    if (!out)
        return NULL;
    for (Py_ssize_t i = 0; i < t->nslots; i++) {
        jentry *j = &t->slots[i];
        if (!j->used)
            continue;
        PyObject *e;
        if (s) {
            long long rt = s->cap1[F_RT] >= 0 ? s->tables[F_RT].entries[j->key[1]].value : -1;
            long long ut = s->cap1[F_UT] >= 0 ? s->tables[F_UT].entries[j->key[2]].value : -1;
            e = Py_BuildValue("((iLL)L)", j->key[0], rt, ut, (long long)j->count);
        } else {
            e = Py_BuildValue("((iii)L)", j->key[0], j->key[1], j->key[2], (long long)j->count);
        }
        if (!e || PyList_Append(out, e) < 0) {
            Py_XDECREF(e);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(e);
    }
    PyMem_RawFree(t->slots);
    t->slots = NULL;
    t->n = t->nslots = 0;
    return out;
}

/* -- cutting one line by the plan ------------------------------------------- */
static Py_ssize_t split_spaces(const char *p, Py_ssize_t n, span *out, Py_ssize_t max) {
    Py_ssize_t k = 0;
    const char *end = p + n;
    for (;;) {
        const char *sp = memchr(p, ' ', (size_t)(end - p));
        if (k >= max)
            return -1;
        if (!sp) {
            out[k].p = p;
            out[k].n = end - p;
            return k + 1;
        }
        out[k].p = p;
        out[k].n = sp - p;
        k++;
        p = sp + 1;
    }
}

static int check_token(const tokspec *ts, span t, span *caps) {
    if (ts->literal)
        return t.n == ts->npre && memcmp(t.p, ts->pre, (size_t)t.n) == 0;
    if (ts->npre && (t.n < ts->npre || memcmp(t.p, ts->pre, (size_t)ts->npre) != 0))
        return 0;
    if (ts->nsuf && (t.n < ts->nsuf ||
                     memcmp(t.p + t.n - ts->nsuf, ts->suf, (size_t)ts->nsuf) != 0))
        return 0;
    if (ts->cap >= 0) {
        if (!t.p)  /* a token split across the line's head and tail: Python takes it */
            return 0;
        caps[ts->cap] = t;
    }
    return 1;
}

/* Tokens of segment 0 (head ++ tail when the line has quotes) against the plan. */
static int cut_tokens(const segspec *sg, span head, span tail, int joined, span *caps) {
    span a[MAX_TOKENS + 1], b[MAX_TOKENS + 1];
    Py_ssize_t na = split_spaces(head.p, head.n, a, MAX_TOKENS + 1);
    if (na < 0 || na > sg->ntok)
        return 0;
    Py_ssize_t nb = 0;
    if (joined) {
        nb = split_spaces(tail.p, tail.n, b, MAX_TOKENS + 1);
        if (nb < 0 || na + nb - 1 != sg->ntok)
            return 0;
    } else if (na != sg->ntok) {
        return 0;
    }
    char buf[VIRTUAL_MAX];
    for (Py_ssize_t i = 0; i < sg->ntok; i++) {
        span t;
        if (!joined || i < na - 1) {
            t = a[i];
        } else if (i > na - 1) {
            t = b[i - na + 1];
        } else {  /* the token where head meets tail */
            span x = a[na - 1], y = b[0];
            if (!x.n) {
                t = y;
            } else if (!y.n) {
                t = x;
            } else {
                if (x.n + y.n > VIRTUAL_MAX)
                    return 0;
                memcpy(buf, x.p, (size_t)x.n);
                memcpy(buf + x.n, y.p, (size_t)y.n);
                span v = {buf, x.n + y.n};
                if (sg->toks[i].cap >= 0)
                    return 0;
                t = v;
            }
        }
        if (!check_token(&sg->toks[i], t, caps))
            return 0;
    }
    return 1;
}

static int cut_line(Scanner *s, const char *p, Py_ssize_t n, span *caps) {
    for (int i = 0; i < NCAP; i++) {
        caps[i].p = NULL;
        caps[i].n = 0;
    }
    if (s->q == 0)
        return cut_tokens(&s->segs[0], (span){p, n}, (span){NULL, 0}, 0, caps);
    const char *quote[MAX_TOKENS];
    const char *end = p + n, *at = p;
    int found = 0;
    while (at < end) {
        const char *qq = memchr(at, '"', (size_t)(end - at));
        if (!qq)
            break;
        if (found >= s->q)
            return 0;
        quote[found++] = qq;
        at = qq + 1;
    }
    if (found != s->q)
        return 0;
    span head = {p, quote[0] - p};
    span tail = {quote[s->q - 1] + 1, end - quote[s->q - 1] - 1};
    for (int g = 0; g < s->nseg; g++) {
        const segspec *sg = &s->segs[g];
        span seg;
        if (g) {
            seg.p = quote[g - 1] + 1;
            seg.n = quote[g] - seg.p;
        }
        if (sg->kind == SEG_RAW) {
            if (sg->cap >= 0)
                caps[sg->cap] = seg;
        } else if (sg->kind == SEG_LIT) {
            if (seg.n != sg->nlit || memcmp(seg.p, sg->lit, (size_t)seg.n) != 0)
                return 0;
        } else if (g == 0) {
            if (!cut_tokens(sg, head, tail, 1, caps))
                return 0;
        } else if (!cut_tokens(sg, seg, (span){NULL, 0}, 0, caps)) {
            return 0;
        }
    }
    return 1;
}

/* The digits of a byte count with its literals cut off; -1 when not a plain count. */
static int64_t parse_count(span t, Py_ssize_t npre, Py_ssize_t nsuf) {
    Py_ssize_t n = t.n - npre - nsuf;
    if (n <= 0 || n > MAX_DIGITS)
        return -1;
    const char *p = t.p + npre;
    int64_t v = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

/* ``1796014074.120`` -> ``1796014074`` (one key a second); other tokens whole. */
static span msec_key(span t, Py_ssize_t npre) {
    if (t.n < npre + 5 || t.p[t.n - 4] != '.')
        return t;
    for (Py_ssize_t i = npre; i < t.n; i++) {
        if (i == t.n - 4)
            continue;
        if (t.p[i] < '0' || t.p[i] > '9')
            return t;
    }
    t.n -= 4;
    return t;
}

/* -- times ------------------------------------------------------------------- */
enum { TIME_NONE, TIME_MSEC, TIME_ISO8601, TIME_LOCAL };

static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int digits(const char *p, int n, int64_t *out) {
    int64_t v = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return 0;
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return 1;
}

/* nginx_values.epoch() for the plain forms nginx writes; 0 leaves the value to Python.
 * Only strings on which epoch() gives this very number are accepted (years 1970-9998). */
static int c_epoch(int kind, const char *p, Py_ssize_t n, const char *z, Py_ssize_t zn,
                   int64_t *out) {
    int64_t y, mo, d, h, mi, sec, zh, zm;
    if (kind == TIME_MSEC) {
        if (n < 1 || n > 18 || !digits(p, (int)n, out))
            return 0;
        return 1;
    }
    if (kind == TIME_ISO8601) {
        /* 2026-11-30T04:47:54+00:00 or ...Z: datetime.fromisoformat(...).timestamp() */
        if (n != 25 && n != 20)
            return 0;
        if (p[4] != '-' || p[7] != '-' || p[10] != 'T' || p[13] != ':' || p[16] != ':')
            return 0;
        if (!digits(p, 4, &y) || !digits(p + 5, 2, &mo) || !digits(p + 8, 2, &d) ||
            !digits(p + 11, 2, &h) || !digits(p + 14, 2, &mi) || !digits(p + 17, 2, &sec))
            return 0;
        static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
        if (y < 1970 || y > 9998 || mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || sec > 59)
            return 0;
        int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        if (d > mdays[mo - 1] + (mo == 2 && leap))
            return 0;
        int64_t off = 0;
        if (n == 20) {
            if (p[19] != 'Z')
                return 0;
        } else {
            if ((p[19] != '+' && p[19] != '-') || p[22] != ':' || !digits(p + 20, 2, &zh) ||
                !digits(p + 23, 2, &zm) || zh > 23 || zm > 59)
                return 0;
            off = (zh * 3600 + zm * 60) * (p[19] == '+' ? 1 : -1);
        }
        *out = days_from_civil(y, (int)mo, (int)d) * 86400 + h * 3600 + mi * 60 + sec - off;
        return 1;
    }
    if (kind == TIME_LOCAL) {
        /* 30/Nov/2026:04:47:54 and +0000: calendar.timegm(), no range checks but the year */
        static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
        if (n != 20 || zn != 5 || (z[0] != '+' && z[0] != '-'))
            return 0;
        mo = 0;
        for (int m = 0; m < 12; m++)
            if (memcmp(p + 3, months + 3 * m, 3) == 0)
                mo = m + 1;
        if (!mo || !digits(p, 2, &d) || !digits(p + 7, 4, &y) || !digits(p + 12, 2, &h) ||
            !digits(p + 15, 2, &mi) || !digits(p + 18, 2, &sec) || !digits(z + 1, 2, &zh) ||
            !digits(z + 3, 2, &zm) || y < 1970 || y > 9998)
            return 0;
        int64_t off = (zh * 3600 + zm * 60) * (z[0] == '+' ? 1 : -1);
        *out = (days_from_civil(y, (int)mo, 1) + d - 1) * 86400 + h * 3600 + mi * 60 + sec - off;
        return 1;
    }
    return 0;
}

/* A new time value that C can read needs no word from Python. */
static void known_time(Scanner *s, Py_ssize_t e, span a, span b) {
    Py_ssize_t n = a.n - s->time_npre - s->time_nsuf;
    int64_t v;
    if (n < 0 || (b.p && b.n < s->zone_npre + s->zone_nsuf))
        return;
    if (!c_epoch(s->time_kind, a.p + s->time_npre, n, b.p ? b.p + s->zone_npre : NULL,
                 b.p ? b.n - s->zone_npre - s->zone_nsuf : 0, &v))
        return;
    vtable *t = &s->tables[F_TIME];
    t->entries[e].state = ST_GOOD;
    t->entries[e].value = v;
    t->npending--;  /* it was the last one added */
}

/* epoch(kind, value, zone): c_epoch for tests, None where Python must decide. */
static PyObject *native_epoch(PyObject *mod, PyObject *args) {
    int kind;
    const char *p, *z = NULL;
    Py_ssize_t n, zn = 0;
    int64_t v;
    if (!PyArg_ParseTuple(args, "iy#|z#", &kind, &p, &n, &z, &zn))
        return NULL;
    if (!c_epoch(kind, p, n, z, zn, &v))
        Py_RETURN_NONE;
    return PyLong_FromLongLong(v);
}

/* -- routes ------------------------------------------------------------------ */
static int route_key(span r, char *out, Py_ssize_t *n);
#define ROUTE_PATH_MAX 100  /* as route_of(): the folded path is cut at 100 characters */

static int is_hex(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* nginx_values._ID_RE for one ASCII path segment. */
static int is_id(const char *p, Py_ssize_t n) {
    int digits = 1, hex = 1, hexdash = 1, token = 1, any_digit = 0;
    if (n == 0)
        return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9';
        any_digit |= d;
        digits &= d;
        hex &= is_hex(c);
        hexdash &= is_hex(c) || c == '-';
        token &= (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || d || c == '_' ||
                 c == '~' || c == '.' || c == '=' || c == '+' || c == '-';
    }
    return digits || (hex && n >= 8) || (hexdash && n >= 32 && n <= 36) ||
           (any_digit && token && n >= 16);
}

/* route_of(request) of nginx_values, written to out as "R" + route, when the
 * request is plain printable ASCII; 0 when Python must decide (it keys the raw
 * request then). out holds at least ROUTE_PATH_MAX + 16 bytes. */
static int route_key(span r, char *out, Py_ssize_t *n) {
    const char *end = r.p + r.n;
    const char *s1 = memchr(r.p, ' ', (size_t)r.n);
    const char *s2 = s1 ? memchr(s1 + 1, ' ', (size_t)(end - s1 - 1)) : NULL;
    int valid = s2 && !memchr(s2 + 1, ' ', (size_t)(end - s2 - 1)) && s1 > r.p;
    for (const char *m = r.p; valid && m < s1; m++)
        valid = *m >= 'A' && *m <= 'Z';
    out[0] = 'R';
    if (!valid) {
        static const char bad[] = "(invalid request)";
        memcpy(out + 1, bad, sizeof(bad) - 1);
        *n = (Py_ssize_t)sizeof(bad);
        return 1;
    }
    const char *u = s1 + 1, *uend = s2;
    const char *cut = memchr(u, '?', (size_t)(uend - u));
    if (cut)
        uend = cut;
    cut = memchr(u, '#', (size_t)(uend - u));
    if (cut)
        uend = cut;
    int digit = 0;
    for (const char *c = u; c < uend; c++) {
        if (*c < 0x21 || *c > 0x7e)
            return 0;
        digit |= *c >= '0' && *c <= '9';
        if (*c == ':' && uend - c >= 3 && c[1] == '/' && c[2] == '/')
            return 0;
    }
    Py_ssize_t mlen = s1 - r.p < 10 ? s1 - r.p : 10;
    memcpy(out + 1, r.p, (size_t)mlen);
    Py_ssize_t o = 1 + mlen, start = o + 1;
    out[o++] = ' ';
    const char *seg = u;
    while (o - start < ROUTE_PATH_MAX) {
        const char *slash = memchr(seg, '/', (size_t)(uend - seg));
        const char *send = slash ? slash : uend;
        const char *text = seg;
        Py_ssize_t len = send - seg;
        if (digit && is_id(seg, len)) {
            text = "{id}";
            len = 4;
        }
        for (Py_ssize_t i = 0; i < len && o - start < ROUTE_PATH_MAX; i++)
            out[o++] = text[i];
        if (!slash)
            break;
        if (o - start < ROUTE_PATH_MAX)
            out[o++] = '/';
        seg = slash + 1;
    }
    if (o == start)  /* f"{method} {path}".strip() with an empty path */
        o--;
    *n = o;
    return 1;
}

/* -- the Python type ----------------------------------------------------------- */
static void free_plan(Scanner *s) {
    if (!s->segs)
        return;
    for (int g = 0; g < s->nseg; g++) {
        segspec *sg = &s->segs[g];
        PyMem_RawFree(sg->lit);
        if (sg->toks) {
            for (int i = 0; i < sg->ntok; i++) {
                PyMem_RawFree(sg->toks[i].pre);
                PyMem_RawFree(sg->toks[i].suf);
            }
            PyMem_RawFree(sg->toks);
        }
    }
    PyMem_RawFree(s->segs);
    s->segs = NULL;
}

static char *copy_bytes(PyObject *b, Py_ssize_t *n) {
    char *src;
    if (PyBytes_AsStringAndSize(b, &src, n) < 0)
        return NULL;
    char *out = PyMem_RawMalloc((size_t)*n + 1);
    if (!out) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(out, src, (size_t)*n);
    return out;
}

/* Whether a capture slot is used, and the literals glued to its token (none when raw). */
static int find_capture(Scanner *s, int cap, Py_ssize_t *npre, Py_ssize_t *nsuf) {
    *npre = *nsuf = 0;
    for (int g = 0; g < s->nseg; g++) {
        segspec *sg = &s->segs[g];
        if (sg->kind == SEG_RAW && sg->cap == cap)
            return 1;
        for (int i = 0; sg->kind == SEG_TOK && i < sg->ntok; i++)
            if (sg->toks[i].cap == cap) {
                *npre = sg->toks[i].npre;
                *nsuf = sg->toks[i].nsuf;
                return 1;
            }
    }
    return 0;
}

/* Scanner(q, segments, field_caps, msec_trim, fold, routes, time_kind, since, until,
 *         table_cap=TABLE_CAP)
 *   segments: [("raw", cap) | ("lit", bytes) | ("tok", [(literal, pre, suf, cap), ...])]
 *   field_caps: 6 pairs (first, second) of capture slots, -1 for none */
static int Scanner_init(Scanner *s, PyObject *args, PyObject *kw) {
    PyObject *segs, *fcaps, *since, *until;
    int msec_trim, fold, routes;
    s->table_cap = TABLE_CAP;
    if (!PyArg_ParseTuple(args, "iO!O!pppiOO|n", &s->q, &PyList_Type, &segs, &PyList_Type,
                          &fcaps, &msec_trim, &fold, &routes, &s->time_kind, &since, &until,
                          &s->table_cap))
        return -1;
    if (s->table_cap < 1 || s->table_cap > TABLE_CAP) {
        PyErr_SetString(PyExc_ValueError, "table_cap out of range");
        return -1;
    }
    s->routes = routes;
    s->fold = fold;
    if (s->q >= MAX_TOKENS) {
        PyErr_SetString(PyExc_ValueError, "too many quotes in the format");
        return -1;
    }
    s->msec_trim = msec_trim;
    s->has_lo = since != Py_None;
    s->has_hi = until != Py_None;
    if (s->has_lo && (s->lo = PyLong_AsLongLong(since)) == -1 && PyErr_Occurred())
        return -1;
    if (s->has_hi && (s->hi = PyLong_AsLongLong(until)) == -1 && PyErr_Occurred())
        return -1;
    if (PyList_GET_SIZE(fcaps) != NFIELD) {
        PyErr_SetString(PyExc_ValueError, "field_caps needs 6 pairs");
        return -1;
    }
    for (int f = 0; f < NFIELD; f++) {
        if (!PyArg_ParseTuple(PyList_GET_ITEM(fcaps, f), "ii", &s->cap1[f], &s->cap2[f]))
            return -1;
        if (s->cap1[f] >= NCAP || s->cap2[f] >= NCAP) {
            PyErr_SetString(PyExc_ValueError, "capture slot out of range");
            return -1;
        }
    }
    free_plan(s);
    s->nseg = (int)PyList_GET_SIZE(segs);
    if (s->nseg < 1 || s->nseg > MAX_TOKENS) {
        PyErr_SetString(PyExc_ValueError, "bad segment count");
        return -1;
    }
    s->segs = PyMem_RawCalloc((size_t)s->nseg, sizeof(segspec));
    if (!s->segs) {
        PyErr_NoMemory();
        return -1;
    }
    for (int g = 0; g < s->nseg; g++) {
        segspec *sg = &s->segs[g];
        const char *kind;
        PyObject *what;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(segs, g), "sO", &kind, &what))
            return -1;
        if (strcmp(kind, "raw") == 0) {
            sg->kind = SEG_RAW;
            sg->cap = (int)PyLong_AsLong(what);
            if (sg->cap == -1 && PyErr_Occurred())
                return -1;
        } else if (strcmp(kind, "lit") == 0) {
            sg->kind = SEG_LIT;
            if (!(sg->lit = copy_bytes(what, &sg->nlit)))
                return -1;
        } else if (strcmp(kind, "tok") == 0 && PyList_Check(what)) {
            sg->kind = SEG_TOK;
            sg->ntok = (int)PyList_GET_SIZE(what);
            if (sg->ntok < 1 || sg->ntok > MAX_TOKENS) {
                PyErr_SetString(PyExc_ValueError, "bad token count");
                return -1;
            }
            sg->toks = PyMem_RawCalloc((size_t)sg->ntok, sizeof(tokspec));
            if (!sg->toks) {
                PyErr_NoMemory();
                return -1;
            }
            for (int i = 0; i < sg->ntok; i++) {
                tokspec *ts = &sg->toks[i];
                PyObject *pre, *suf;
                if (!PyArg_ParseTuple(PyList_GET_ITEM(what, i), "iO!O!i", &ts->literal,
                                      &PyBytes_Type, &pre, &PyBytes_Type, &suf, &ts->cap))
                    return -1;
                if (ts->cap >= NCAP) {
                    PyErr_SetString(PyExc_ValueError, "capture slot out of range");
                    return -1;
                }
                if (!(ts->pre = copy_bytes(pre, &ts->npre)) ||
                    !(ts->suf = copy_bytes(suf, &ts->nsuf)))
                    return -1;
            }
        } else {
            PyErr_Format(PyExc_ValueError, "unknown segment kind %s", kind);
            return -1;
        }
    }
    if (s->cap1[F_REQ] < 0 && s->cap2[F_REQ] >= 0) {
        PyErr_SetString(PyExc_ValueError, "second capture without a first");
        return -1;
    }
    s->has_bytes = find_capture(s, CAP_BYTES, &s->bytes_npre, &s->bytes_nsuf);
    find_capture(s, CAP_TIME, &s->time_npre, &s->time_nsuf);
    find_capture(s, CAP_ZONE, &s->zone_npre, &s->zone_nsuf);
    for (int f = 0; f < NFIELD; f++)
        if (vt_clear(&s->tables[f]) < 0) {
            PyErr_NoMemory();
            return -1;
        }
    if (vt_clear(&s->requests) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    s->overflow = -1;
    return 0;
}

static void Scanner_dealloc(Scanner *s) {
    free_plan(s);
    for (int f = 0; f < NFIELD; f++)
        vt_free(&s->tables[f]);
    vt_free(&s->requests);
    PyMem_RawFree(s->by_status.slots);
    PyMem_RawFree(s->by_time.slots);
    PyMem_RawFree(s->line_entry);
    PyMem_RawFree(s->line_bytes);
    PyMem_RawFree(s->line_start);
    PyMem_RawFree(s->line_end);
    PyMem_RawFree(s->line_ok);
    PyMem_RawFree(s->folded);
    PyMem_RawFree(s->secs);
    if (s->scanned)
        PyBuffer_Release(&s->view);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyObject *value_object(vtable *t, Py_ssize_t idx, int pair) {
    entry *en = &t->entries[idx];
    if (!pair)
        return PyBytes_FromStringAndSize(t->arena + en->off, en->n1 + en->n2);
    return Py_BuildValue("(y#y#)", t->arena + en->off, en->n1, t->arena + en->off + en->n1,
                         en->n2);
}

static int ensure_lines(Scanner *s, Py_ssize_t n) {
    if (n <= s->clines)
        return 0;
    Py_ssize_t c = s->clines ? s->clines : 1024;
    while (c < n)
        c *= 2;
    void *a = PyMem_RawRealloc(s->line_entry, (size_t)c * NFIELD * sizeof(int32_t));
    if (!a)
        return -1;
    s->line_entry = a;
    if (!(a = PyMem_RawRealloc(s->line_bytes, (size_t)c * sizeof(int64_t))))
        return -1;
    s->line_bytes = a;
    if (!(a = PyMem_RawRealloc(s->line_start, (size_t)c * sizeof(Py_ssize_t))))
        return -1;
    s->line_start = a;
    if (!(a = PyMem_RawRealloc(s->line_end, (size_t)c * sizeof(Py_ssize_t))))
        return -1;
    s->line_end = a;
    if (!(a = PyMem_RawRealloc(s->line_ok, (size_t)c)))
        return -1;
    s->line_ok = a;
    s->clines = c;
    return 0;
}

/* Undo the pending entries of a scan that could not finish (a full table). */
static void drop_pending(Scanner *s) {
    for (int f = 0; f < NFIELD; f++)
        s->tables[f].npending = 0;
}

static int settle(Scanner *s, Py_ssize_t i);

static PyObject *scan_view(Scanner *s, PyObject *arg);

static PyObject *Scanner_scan(Scanner *s, PyObject *arg) {
    if (s->scanned) {
        PyErr_SetString(PyExc_RuntimeError, "scan() again before commit()");
        return NULL;
    }
    PyObject *out = scan_view(s, arg);
    if (!out || out == Py_None)
        PyBuffer_Release(&s->view);
    else
        s->scanned = 1;
    return out;
}

/* scan() once the chunk's buffer is held in s->view. */
static PyObject *scan_view(Scanner *s, PyObject *arg) {
    if (PyObject_GetBuffer(arg, &s->view, PyBUF_SIMPLE) < 0)
        return NULL;
    const char *data = s->view.buf;
    Py_ssize_t size = s->view.len;
    if (s->fold && memchr(data, ',', (size_t)size)) {
        if (grow((void **)&s->folded, &s->cfolded, size + 1, 1) < 0)
            return PyErr_NoMemory();
        char *out = s->folded;
        const char *p = data, *end = data + size, *c;
        while ((c = memchr(p, ',', (size_t)(end - p)))) {
            memcpy(out, p, (size_t)(c - p + 1));
            out += c - p + 1;
            p = c + 1;
            if (p < end && *p == ' ')
                p++;
        }
        memcpy(out, p, (size_t)(end - p));
        out += end - p;
        data = s->folded;
        size = out - s->folded;
    }
    s->data = data;
    Py_ssize_t lines = 1;
    for (const char *p = data; (p = memchr(p, '\n', (size_t)(data + size - p))); p++)
        lines++;
    if (ensure_lines(s, lines) < 0)
        return PyErr_NoMemory();
    /* a line adds at most one value to each table: a chunk that might not fit is
     * refused before anything is counted (Python flushes, resets, and scans again) */
    Py_ssize_t room = size + lines * (ROUTE_PATH_MAX + 16);  /* arena bytes a scan may add */
    if (size > INT32_MAX / 2)
        return PyErr_Format(PyExc_ValueError, "a chunk of %zd bytes is too large", size);
    for (int f = 0; f < NFIELD; f++)
        if (s->tables[f].nentries + lines > s->table_cap || s->tables[f].narena + room > UINT32_MAX)
            Py_RETURN_NONE;
    /* raw request -> route entry is only a cache: emptied alone (a unique id per request
     * fills it fast, and a full reset would make Python learn every value again) */
    if ((s->requests.nentries + lines > s->table_cap || s->requests.narena + room > UINT32_MAX)
        && vt_clear(&s->requests) < 0)
        return PyErr_NoMemory();
    int have_bytes = s->has_bytes;
    int failed = 0;
    Py_ssize_t i = 0, pos = 0;
    s->c_lines = s->c_outside = s->c_bytes = s->c_bytes_n = 0;
    if (s->nsecs_used) {
        memset(s->secs, 0, (size_t)s->nsecs * sizeof(secslot));
        s->nsecs_used = 0;
    }
    for (int f = 0; f < NFIELD; f++)
        s->last_e[f] = -1;
    Py_BEGIN_ALLOW_THREADS
    while (i < lines) {
        const char *nl = memchr(data + pos, '\n', (size_t)(size - pos));
        Py_ssize_t end = nl ? nl - data : size;
        span caps[NCAP];
        s->line_start[i] = pos;
        s->line_end[i] = end;
        int ok = cut_line(s, data + pos, end - pos, caps);
        int64_t nbytes = 0;
        if (ok && have_bytes) {
            nbytes = parse_count(caps[CAP_BYTES], s->bytes_npre, s->bytes_nsuf);
            if (nbytes < 0)
                ok = 0;
        }
        int32_t *ents = &s->line_entry[i * NFIELD];
        for (int f = 0; ok && f < NFIELD; f++) {
            if (s->cap1[f] < 0) {
                ents[f] = -1;
                continue;
            }
            span a = caps[s->cap1[f]];
            span b = s->cap2[f] >= 0 ? caps[s->cap2[f]] : (span){NULL, 0};
            if (f == F_TIME && s->msec_trim)
                a = msec_key(a, s->time_npre);
            Py_ssize_t e;
            if (s->last_e[f] >= 0 && a.n == s->last_a[f].n && b.n == s->last_b[f].n &&
                memcmp(a.p, s->last_a[f].p, (size_t)a.n) == 0 &&
                (!b.n || memcmp(b.p, s->last_b[f].p, (size_t)b.n) == 0)) {
                ents[f] = (int32_t)s->last_e[f];
                continue;
            }
            if (f == F_REQ && s->routes) {
                e = vt_lookup(&s->requests, a, b, s->table_cap);
                if (e >= 0 && s->requests.entries[e].state == ST_PENDING) {
                    char route[ROUTE_PATH_MAX + 16];
                    Py_ssize_t rn, r;
                    vtable *routes = &s->tables[f];
                    if (route_key(a, route, &rn)) {
                        r = vt_lookup(routes, (span){route, rn}, (span){NULL, 0}, s->table_cap);
                        if (r >= 0 && s->overflow >= 0 &&
                            routes->entries[r].state == ST_PENDING) {
                            routes->entries[r].state = ST_GOOD;  /* Python would say "(other)" */
                            routes->entries[r].value = s->overflow;
                            routes->npending--;
                        }
                    } else {
                        r = vt_lookup(routes, (span){"Q", 1}, a, s->table_cap);
                    }
                    s->requests.npending = 0;
                    if (r >= 0) {
                        s->requests.entries[e].state = ST_GOOD;
                        s->requests.entries[e].value = r;
                    }
                    e = r;
                } else if (e >= 0) {
                    e = (Py_ssize_t)s->requests.entries[e].value;
                }
            } else {
                e = vt_lookup(&s->tables[f], a, b, s->table_cap);
                if (f == F_TIME && e >= 0 && s->tables[f].entries[e].state == ST_PENDING)
                    known_time(s, e, a, b);
            }
            if (e < 0) {
                failed = 1;
                break;
            }
            ents[f] = (int32_t)e;
            s->last_a[f] = a;
            s->last_b[f] = b;
            s->last_e[f] = e;
        }
        if (failed)
            break;
        char state = ok ? LINE_SETTLED : LINE_REJECTED;
        for (int f = 0; ok && f < NFIELD; f++) {
            if (ents[f] < 0)
                continue;
            int st = s->tables[f].entries[ents[f]].state;
            if (st == ST_BAD) {
                state = LINE_REJECTED;
                break;
            }
            if (st == ST_PENDING)
                state = LINE_WAITING;
        }
        s->line_ok[i] = state;
        s->line_bytes[i] = nbytes;
        if (state == LINE_SETTLED && settle(s, i) < 0) {
            failed = 1;
            break;
        }
        pos = end + 1;
        i++;
    }
    Py_END_ALLOW_THREADS
    if (failed) {  /* out of memory (a full table was ruled out above) */
        drop_pending(s);
        return PyErr_NoMemory();
    }
    s->nlines = lines;
    PyObject *out = PyList_New(NFIELD);
    if (!out)
        return NULL;
    for (int f = 0; f < NFIELD; f++) {
        vtable *t = &s->tables[f];
        PyObject *lst = PyList_New(t->npending);
        if (!lst) {
            Py_DECREF(out);
            return NULL;
        }
        for (Py_ssize_t k = 0; k < t->npending; k++) {
            PyObject *v = value_object(t, t->pending[k], s->cap2[f] >= 0);
            if (!v) {
                Py_DECREF(lst);
                Py_DECREF(out);
                return NULL;
            }
            PyList_SET_ITEM(lst, k, v);
        }
        PyList_SET_ITEM(out, f, lst);
    }
    return out;
}

static PyObject *Scanner_learn(Scanner *s, PyObject *args) {
    int f;
    PyObject *vals;
    if (!PyArg_ParseTuple(args, "iO!", &f, &PyList_Type, &vals))
        return NULL;
    if (f < 0 || f >= NFIELD) {
        PyErr_SetString(PyExc_ValueError, "no such field");
        return NULL;
    }
    vtable *t = &s->tables[f];
    if (PyList_GET_SIZE(vals) != t->npending) {
        PyErr_SetString(PyExc_ValueError, "learn() needs one verdict per new value");
        return NULL;
    }
    for (Py_ssize_t k = 0; k < t->npending; k++) {
        PyObject *v = PyList_GET_ITEM(vals, k);
        entry *en = &t->entries[t->pending[k]];
        if (v == Py_None) {
            en->state = ST_BAD;
            continue;
        }
        long long x = PyLong_AsLongLong(v);
        if (x == -1 && PyErr_Occurred())
            return NULL;
        en->value = x;
        en->state = ST_GOOD;
    }
    t->npending = 0;
    Py_RETURN_NONE;
}

/* Count line i, whose values are all known good: window, joint key, second, bytes.
 * -1 on memory error. Runs without the GIL (PyMem_Raw only). */
static int settle(Scanner *s, Py_ssize_t i) {
    int32_t *ents = &s->line_entry[i * NFIELD];
    int32_t id[NFIELD] = {0, 0, 0, 0, 0, 0};  /* absent fields: 0, which Python maps to "-" */
    int64_t sec = 0;
    for (int f = 0; f < NFIELD; f++) {
        if (ents[f] < 0)
            continue;
        int64_t v = s->tables[f].entries[ents[f]].value;
        if (f == F_TIME)
            sec = v;
        else
            id[f] = (int32_t)v;
    }
    int timed = s->cap1[F_TIME] >= 0;
    if (timed && ((s->has_lo && sec < s->lo) || (s->has_hi && sec >= s->hi))) {
        s->c_outside++;
        return 0;
    }
    s->c_lines++;
    if (s->has_bytes) {
        s->c_bytes += s->line_bytes[i];
        s->c_bytes_n++;
    }
    int32_t by_status[3] = {id[F_REQ], id[F_STATUS], id[F_US]};
    /* times: keyed by their entry (the learned value is the decoded time, not an id) */
    int32_t by_time[3] = {id[F_REQ], ents[F_RT], ents[F_UT]};
    if (joint_add(&s->by_status, by_status, 1) < 0 || joint_add(&s->by_time, by_time, 1) < 0)
        return -1;
    if (!timed)
        return 0;
    if ((s->nsecs_used + 1) * 2 > s->nsecs) {
        Py_ssize_t nn = s->nsecs ? s->nsecs * 2 : 64;
        secslot *ns = PyMem_RawCalloc((size_t)nn, sizeof(secslot));
        if (!ns)
            return -1;
        for (Py_ssize_t k = 0; k < s->nsecs; k++) {
            if (!s->secs[k].used)
                continue;
            Py_ssize_t p = (Py_ssize_t)((uint64_t)s->secs[k].sec * 0x9E3779B97F4A7C15ULL >> 7)
                           & (nn - 1);
            while (ns[p].used)
                p = (p + 1) & (nn - 1);
            ns[p] = s->secs[k];
        }
        PyMem_RawFree(s->secs);
        s->secs = ns;
        s->nsecs = nn;
    }
    Py_ssize_t p = (Py_ssize_t)((uint64_t)sec * 0x9E3779B97F4A7C15ULL >> 7) & (s->nsecs - 1);
    while (s->secs[p].used && s->secs[p].sec != sec)
        p = (p + 1) & (s->nsecs - 1);
    if (!s->secs[p].used) {
        s->secs[p].used = 1;
        s->secs[p].sec = sec;
        s->nsecs_used++;
    }
    s->secs[p].count++;
    s->secs[p].bytes += s->has_bytes ? s->line_bytes[i] : 0;
    return 0;
}


static PyObject *Scanner_commit(Scanner *s, PyObject *unused) {
    if (!s->scanned) {
        PyErr_SetString(PyExc_RuntimeError, "commit() without scan()");
        return NULL;
    }
    for (int f = 0; f < NFIELD; f++)
        if (s->tables[f].npending) {
            PyErr_SetString(PyExc_RuntimeError, "commit() before learn() for every field");
            return NULL;
        }
    for (Py_ssize_t i = 0; i < s->nlines; i++) {
        if (s->line_ok[i] != LINE_WAITING)
            continue;
        int32_t *ents = &s->line_entry[i * NFIELD];
        s->line_ok[i] = LINE_SETTLED;
        for (int f = 0; f < NFIELD; f++)
            if (ents[f] >= 0 && s->tables[f].entries[ents[f]].state != ST_GOOD) {
                s->line_ok[i] = LINE_REJECTED;
                break;
            }
        if (s->line_ok[i] == LINE_SETTLED && settle(s, i) < 0) {
            PyErr_NoMemory();
            PyBuffer_Release(&s->view);
            s->scanned = 0;
            return NULL;
        }
    }
    PyObject *per_sec = PyList_New(0), *rejected = PyList_New(0), *out = NULL;
    if (!per_sec || !rejected)
        goto done;
    for (Py_ssize_t k = 0; k < s->nsecs; k++) {
        if (!s->secs[k].used)
            continue;
        PyObject *t = Py_BuildValue("(LLL)", (long long)s->secs[k].sec,
                                    (long long)s->secs[k].count, (long long)s->secs[k].bytes);
        if (!t || PyList_Append(per_sec, t) < 0) {
            Py_XDECREF(t);
            goto done;
        }
        Py_DECREF(t);
    }
    const char *data = s->data;
    for (Py_ssize_t i = 0; i < s->nlines; i++) {
        if (s->line_ok[i] != LINE_REJECTED)
            continue;
        PyObject *line = PyBytes_FromStringAndSize(data + s->line_start[i],
                                                   s->line_end[i] - s->line_start[i]);
        if (!line || PyList_Append(rejected, line) < 0) {
            Py_XDECREF(line);
            goto done;
        }
        Py_DECREF(line);
    }
    out = Py_BuildValue("(LLLLOO)", (long long)s->c_lines, (long long)s->c_outside,
                        (long long)s->c_bytes, (long long)s->c_bytes_n, per_sec, rejected);
done:
    Py_XDECREF(per_sec);
    Py_XDECREF(rejected);
    if (s->scanned)
        PyBuffer_Release(&s->view);
    s->scanned = 0;
    s->nlines = 0;
    return out;
}

static PyObject *Scanner_flush(Scanner *s, PyObject *unused) {
    PyObject *a = joint_take(&s->by_status, NULL);
    if (!a)
        return NULL;
    PyObject *b = joint_take(&s->by_time, s);
    if (!b) {
        Py_DECREF(a);
        return NULL;
    }
    return Py_BuildValue("(NN)", a, b);
}

static PyObject *Scanner_reset(Scanner *s, PyObject *unused) {
    if (s->scanned) {
        PyErr_SetString(PyExc_RuntimeError, "reset() between scan() and commit()");
        return NULL;
    }
    if (s->by_status.n || s->by_time.n) {
        PyErr_SetString(PyExc_RuntimeError, "reset() before flush(): counts would be lost");
        return NULL;
    }
    for (int f = 0; f < NFIELD; f++)
        if (vt_clear(&s->tables[f]) < 0)
            return PyErr_NoMemory();
    if (vt_clear(&s->requests) < 0)
        return PyErr_NoMemory();
    s->overflow = -1;
    Py_RETURN_NONE;
}

/* routes_full(keys, ids, other): Python hands out no new route names any more. Every
 * name it knows goes in as a known key; a route named here that is not among them
 * gets ``other`` without asking (Python would answer "(other)"). Undone by reset(). */
static PyObject *Scanner_routes_full(Scanner *s, PyObject *args) {
    PyObject *keys, *ids;
    long long other;
    if (!PyArg_ParseTuple(args, "O!O!L", &PyList_Type, &keys, &PyList_Type, &ids, &other))
        return NULL;
    if (s->scanned || PyList_GET_SIZE(keys) != PyList_GET_SIZE(ids) || !s->routes) {
        PyErr_SetString(PyExc_RuntimeError, "routes_full(): not between chunks, or no routes");
        return NULL;
    }
    vtable *t = &s->tables[F_REQ];
    if (t->nentries + PyList_GET_SIZE(keys) > s->table_cap)
        Py_RETURN_FALSE;  /* no room for every name: Python keeps naming routes itself */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys); i++) {
        char *p;
        Py_ssize_t n;
        if (PyBytes_AsStringAndSize(PyList_GET_ITEM(keys, i), &p, &n) < 0)
            return NULL;
        long long id = PyLong_AsLongLong(PyList_GET_ITEM(ids, i));
        if (id == -1 && PyErr_Occurred())
            return NULL;
        Py_ssize_t e = vt_lookup(t, (span){p, n}, (span){NULL, 0}, s->table_cap);
        if (e == -1)
            return PyErr_NoMemory();
        if (e == -2) {
            PyErr_SetString(PyExc_RuntimeError, "routes_full(): the table is full");
            return NULL;
        }
        if (t->entries[e].state == ST_PENDING) {
            t->entries[e].state = ST_GOOD;
            t->entries[e].value = id;
        }
    }
    t->npending = 0;
    s->overflow = other;
    Py_RETURN_TRUE;
}

static PyObject *Scanner_abandon(Scanner *s, PyObject *unused) {
    drop_pending(s);
    if (s->scanned)
        PyBuffer_Release(&s->view);
    s->scanned = 0;
    s->nlines = 0;
    Py_RETURN_NONE;
}

static PyObject *Scanner_joint_size(Scanner *s, void *closure) {
    return PyLong_FromSsize_t(s->by_status.n + s->by_time.n);
}

static PyMethodDef Scanner_methods[] = {
    {"scan", (PyCFunction)Scanner_scan, METH_O,
     "scan(chunk) -> new raw values per field, or None when a value table is full"},
    {"learn", (PyCFunction)Scanner_learn, METH_VARARGS,
     "learn(field, verdicts): an int id per new value, None for a bad one"},
    {"commit", (PyCFunction)Scanner_commit, METH_NOARGS,
     "commit() -> (lines, outside, bytes_total, bytes_n, [(sec, n, bytes)], [rejected line])"},
    {"flush", (PyCFunction)Scanner_flush, METH_NOARGS,
     "flush() -> ([((route, status, us), n)], [((route, rt, ut), n)]) ids; empties them"},
    {"reset", (PyCFunction)Scanner_reset, METH_NOARGS, "forget every learned value"},
    {"routes_full", (PyCFunction)Scanner_routes_full, METH_VARARGS,
     "routes_full(keys, ids, other) -> bool: no new route names; unknown routes get other"},
    {"abandon", (PyCFunction)Scanner_abandon, METH_NOARGS,
     "drop a scanned chunk without committing it"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Scanner_getset[] = {
    {"joint_size", (getter)Scanner_joint_size, NULL, "distinct joint keys held", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ScannerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "inferfit.probes._nginx_native.Scanner",
    .tp_basicsize = sizeof(Scanner),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Cuts nginx log lines by a LogFormat plan and counts them (see nginx_native.py).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Scanner_init,
    .tp_dealloc = (destructor)Scanner_dealloc,
    .tp_methods = Scanner_methods,
    .tp_getset = Scanner_getset,
};

/* route(request): route_key for tests, None where Python must decide. */
static PyObject *native_route(PyObject *mod, PyObject *arg) {
    char *p;
    Py_ssize_t n, rn;
    char out[ROUTE_PATH_MAX + 16];
    if (PyBytes_AsStringAndSize(arg, &p, &n) < 0)
        return NULL;
    if (!route_key((span){p, n}, out, &rn))
        Py_RETURN_NONE;
    return PyUnicode_DecodeASCII(out + 1, rn - 1, "strict");
}

static PyMethodDef module_methods[] = {
    {"route", native_route, METH_O, "route(request): the scanner's route_of(), or None"},
    {"epoch", native_epoch, METH_VARARGS,
     "epoch(kind, value, zone=None): the scanner's reading of a time, None if it leaves it"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_nginx_native",
    "The per-line work of inferfit's nginx aggregation, in C (optional accelerator).", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__nginx_native(void) {
    if (PyType_Ready(&ScannerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    Py_INCREF(&ScannerType);
    if (PyModule_AddObject(m, "Scanner", (PyObject *)&ScannerType) < 0) {
        Py_DECREF(&ScannerType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
