/* Value tables (distinct raw values of a field, in an arena) and joint counts. */
#include "_nginx_native.h"

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

void vt_free(vtable *t) {
    PyMem_RawFree(t->slots);
    PyMem_RawFree(t->entries);
    PyMem_RawFree(t->arena);
    PyMem_RawFree(t->pending);
    memset(t, 0, sizeof(*t));
}

int vt_clear(vtable *t) {
    vt_free(t);
    return vt_init(t);
}

int grow(void **buf, Py_ssize_t *cap, Py_ssize_t need, size_t item) {
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
Py_ssize_t vt_lookup(vtable *t, span a, span b, Py_ssize_t cap) {
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

static uint64_t hash_key(const int32_t *k) {
    uint64_t h = 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i < 3; i++) {
        h = (h ^ (uint32_t)k[i]) * 0xff51afd7ed558ccdULL;
        h ^= h >> 31;
    }
    return h;
}

int joint_add(jtable *t, const int32_t *k, int64_t c) {
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
