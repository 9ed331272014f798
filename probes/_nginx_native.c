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
 * Flow per chunk (complete lines joined by "\n"; retry lists are folded here):
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
#include "_nginx_native.h"

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

/* -- times ------------------------------------------------------------------- */

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
    data = fold_chunk(s, data, &size);
    if (!data)
        return PyErr_NoMemory();
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
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = scan_lines(s, data, size, lines);
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
