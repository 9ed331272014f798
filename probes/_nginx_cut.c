/* Cutting lines by the LogFormat plan, and counting them (no Python objects here). */
#include "_nginx_native.h"

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

/* Count line i, whose values are all known good: window, joint key, second, bytes.
 * -1 on memory error. Runs without the GIL (PyMem_Raw only). */
int settle(Scanner *s, Py_ssize_t i) {
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

/* Retry lists ", " -> "," into s->folded; the chunk itself when it has no comma.
 * NULL when out of memory. */
const char *fold_chunk(Scanner *s, const char *data, Py_ssize_t *size_io) {
    Py_ssize_t size = *size_io;
    if (s->fold && memchr(data, ',', (size_t)size)) {
        if (grow((void **)&s->folded, &s->cfolded, size + 1, 1) < 0)
            return NULL;
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
    *size_io = size;
    return data;
}

/* Cut, look up and (where every value is known) count the chunk's lines: the work
 * scan() does without the GIL. 1 when out of memory. */
int scan_lines(Scanner *s, const char *data, Py_ssize_t size, Py_ssize_t lines) {
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
    return failed;
}
