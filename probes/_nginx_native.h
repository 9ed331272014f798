/* Types and shared functions of inferfit.probes._nginx_native (see _nginx_native.c). */
#ifndef INFERFIT_NGINX_NATIVE_H
#define INFERFIT_NGINX_NATIVE_H

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

enum { TIME_NONE, TIME_MSEC, TIME_ISO8601, TIME_LOCAL };
#define ROUTE_PATH_MAX 100  /* as route_of(): the folded path is cut at 100 characters */

/* _nginx_tables.c: value tables and joint counts */
void vt_free(vtable *t);
int vt_clear(vtable *t);
int grow(void **buf, Py_ssize_t *cap, Py_ssize_t need, size_t item);
Py_ssize_t vt_lookup(vtable *t, span a, span b, Py_ssize_t cap);
int joint_add(jtable *t, const int32_t *k, int64_t c);

/* _nginx_cut.c: cutting and counting lines */
const char *fold_chunk(Scanner *s, const char *data, Py_ssize_t *size_io);
int scan_lines(Scanner *s, const char *data, Py_ssize_t size, Py_ssize_t lines);
int settle(Scanner *s, Py_ssize_t i);

/* _nginx_values.c: times and routes read the way Python reads them */
int c_epoch(int kind, const char *p, Py_ssize_t n, const char *z, Py_ssize_t zn, int64_t *out);
void known_time(Scanner *s, Py_ssize_t e, span a, span b);
int route_key(span r, char *out, Py_ssize_t *n);

#endif
