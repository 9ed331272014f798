/* Times and routes read in C exactly as nginx_values reads them, or left to Python. */
#include "_nginx_native.h"

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
int c_epoch(int kind, const char *p, Py_ssize_t n, const char *z, Py_ssize_t zn,
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
void known_time(Scanner *s, Py_ssize_t e, span a, span b) {
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
int route_key(span r, char *out, Py_ssize_t *n) {
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
