/* The simulated timeline in C (timeline.h): Timeline.dispatch and Timeline.demand of
 * mpl/timemodel/timeline.py, operation for operation.
 *
 * State: the clocks as doubles; transfers and bytes as Python holds them (the ints loaded,
 * plus what was added since, exactly, in 128 bits; a float bytes as a double); the arrival
 * map as a dense array over the keys with a doubly linked list of the keys that have an
 * entry, in the dict's insertion order (a new key at the tail, a key set again keeps its
 * place, a popped one leaves the list), so looking up, popping and pruning cost what Python's
 * dict does, and writing it back gives the same dict, order included. The costs of several
 * tokens (Costs.gpu_expert_ms, cpu_expert_ms, dense_ms) are computed here from the Costs
 * object's numbers: every term that does not depend on the tokens is computed once when the
 * timeline is read, with the operations Python performs on each call (an int number is
 * converted as Python converts it; tokens x an int number is the exact product, rounded once).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "timeline.h"
#include "pysum.h"

/* ------------------------------------------------------------------ 128-bit integers */
typedef struct { uint64_t hi, lo; } U128;

static inline void u128_add(U128 *a, U128 b) {
    uint64_t lo = a->lo + b.lo;
    a->hi += b.hi + (lo < a->lo);
    a->lo = lo;
}

static inline U128 u128_mul(uint64_t a, uint64_t b) {
    uint64_t a0 = a & 0xffffffffu, a1 = a >> 32, b0 = b & 0xffffffffu, b1 = b >> 32;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffu) + (p10 & 0xffffffffu);
    U128 r;
    r.lo = (mid << 32) | (p00 & 0xffffffffu);
    r.hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
    return r;
}

static inline int bitlen64(uint64_t x) {
    int n = 0;
    while (x) { n++; x >>= 1; }
    return n;
}

/* v as the nearest double (ties to even), as Python converts an int: the top 64 bits with a
 * sticky bit for the rest are converted (correctly rounded: the sticky bit lies far below the
 * rounding position), then scaled exactly */
static double u128_to_double(U128 v) {
    if (!v.hi) return (double)v.lo;
    int h = bitlen64(v.hi);
    uint64_t top, sticky;
    if (h == 64) { top = v.hi; sticky = v.lo != 0; }
    else {
        top = (v.hi << (64 - h)) | (v.lo >> h);
        sticky = (v.lo << (64 - h)) != 0;
    }
    return ldexp((double)(top | sticky), h);
}

static inline uint64_t mag64(int64_t x) {   /* |x| without overflow */
    return x < 0 ? (uint64_t)(-(x + 1)) + 1u : (uint64_t)x;
}

/* a Python int from a 128-bit magnitude */
static PyObject *u128_to_py(U128 v) {
    if (!v.hi) return PyLong_FromUnsignedLongLong(v.lo);
    PyObject *hi = PyLong_FromUnsignedLongLong(v.hi), *lo = NULL, *sh = NULL, *x = NULL, *r = NULL;
    if (!hi || !(lo = PyLong_FromUnsignedLongLong(v.lo)) || !(sh = PyLong_FromLong(64)) ||
            !(x = PyNumber_Lshift(hi, sh)))
        goto done;
    r = PyNumber_Or(x, lo);
done:
    Py_XDECREF(hi); Py_XDECREF(lo); Py_XDECREF(sh); Py_XDECREF(x);
    return r;
}

/* ------------------------------------------------------------------ the state */
typedef struct { int is_int; int64_t i; double f; } Num;   /* a cost number as Python holds it */
typedef struct { double ready, comp; } Late;

struct TL {
    PyObject *tl;                  /* the Timeline (strong reference) */
    long L, E, K;
    double now, link, stall_ms, transfer_ms, gpu_ms, cpu_ms, cpu_wait_ms;
    double txf, gpu1, cpu1, dense1;
    int overlap;
    PyObject *transfers0;          /* tl.transfers at the last load or store */
    U128 transfers_d;              /* transfers added since */
    int eb_int;                    /* expert_bytes an int (eb_i) or a float (eb_f) */
    int64_t eb_i;
    double eb_f;
    int bytes_float;               /* tl.bytes a float (bytes_f), else the int bytes0 + bytes_d */
    double bytes_f;
    PyObject *bytes0;
    U128 bytes_d;
    double bytes0_f;               /* bytes0 as a float (an int bytes + a float expert_bytes) */
    /* the several-token costs: Python's terms that do not depend on the tokens */
    Num flops, dense_bytes;
    double launch;                 /* kernel_launch_us * 1e-3 */
    double gpu_mem, cpu_mem, dense_mem;
    double gpu_div, cpu_div;       /* gpu_tflops * 1e12, cpu_gflops * 1e9 */
    /* the arrival map */
    double *arr;
    int32_t *prev, *next;          /* prev[k] == -2: k has no entry; -1: none (head / tail) */
    int32_t head, tail;
    long na;
    int arr_dirty;                 /* changed since the last load or store */
    int arr_pruned;                /* pruned since: Python made a new dict */
    PyObject *arr_obj;             /* the dict read (strong reference) */
    Late *late;                    /* E */
    /* late prefetches (Timeline.late, .late_layers): the totals read, and what was added
     * since; the layers that got their first one since, in that order (Python inserts a
     * layer's entry at its first) */
    PyObject *late0, *ll_obj;      /* an int, an exact dict (strong references) */
    uint64_t late_d;
    uint64_t *ll_d;                /* L: per layer, added since */
    int32_t *ll_order;             /* L */
    long ll_n;
};

#define ABSENT (-2)

static inline int ar_has(const TL *T, long k) { return T->prev[k] != ABSENT; }

static inline void ar_set(TL *T, long k, double v) {
    if (!ar_has(T, k)) {
        T->prev[k] = T->tail;
        T->next[k] = -1;
        if (T->tail >= 0) T->next[T->tail] = (int32_t)k;
        else T->head = (int32_t)k;
        T->tail = (int32_t)k;
        T->na++;
    }
    T->arr[k] = v;
    T->arr_dirty = 1;
}

static inline void ar_pop(TL *T, long k) {
    if (!ar_has(T, k)) return;
    int32_t p = T->prev[k], n = T->next[k];
    if (p >= 0) T->next[p] = n; else T->head = n;
    if (n >= 0) T->prev[n] = p; else T->tail = p;
    T->prev[k] = ABSENT;
    T->na--;
    T->arr_dirty = 1;
}

static void ar_clear(TL *T) {
    for (int32_t k = T->head; k >= 0;) {
        int32_t n = T->next[k];
        T->prev[k] = ABSENT;
        k = n;
    }
    T->head = T->tail = -1;
    T->na = 0;
}

/* ------------------------------------------------------------------ reading the timeline */
static PyObject *s_timeline_type, *s_costs_type, *s_profile_type;

static int import_types(void) {
    if (s_timeline_type) return 0;
    PyObject *m = PyImport_ImportModule("mpl.timemodel.timeline");
    if (!m) return -1;
    PyObject *t = PyObject_GetAttrString(m, "Timeline");
    Py_DECREF(m);
    if (!t) return -1;
    m = PyImport_ImportModule("mpl.timemodel.hardware");
    if (!m) { Py_DECREF(t); return -1; }
    PyObject *c = PyObject_GetAttrString(m, "Costs"), *p = c ? PyObject_GetAttrString(m, "Profile") : NULL;
    Py_DECREF(m);
    if (!p) { Py_DECREF(t); Py_XDECREF(c); return -1; }
    if (!PyType_Check(t) || !PyType_Check(c) || !PyType_Check(p)) {
        Py_DECREF(t); Py_DECREF(c); Py_DECREF(p);
        PyErr_SetString(PyExc_TypeError, "timeline: Timeline, Costs or Profile is not a class");
        return -1;
    }
    s_timeline_type = t; s_costs_type = c; s_profile_type = p;
    return 0;
}

/* obj.name: a new reference, NULL with an exception */
static PyObject *attr(PyObject *obj, const char *name) { return PyObject_GetAttrString(obj, name); }

/* a finite exact float attribute: 1, 0 not one, -1 */
static int get_finite(PyObject *obj, const char *name, double *out) {
    PyObject *v = attr(obj, name);
    if (!v) return -1;
    int ok = PyFloat_CheckExact(v) && isfinite(PyFloat_AS_DOUBLE(v));
    if (ok) *out = PyFloat_AS_DOUBLE(v);
    Py_DECREF(v);
    return ok;
}

/* a number (exact int within 64 bits, or exact float) and its value as Python converts it
 * to a float (a finite one): 1, 0 not one, -1 */
static int get_num(PyObject *obj, const char *name, Num *out, double *asf) {
    PyObject *v = attr(obj, name);
    if (!v) return -1;
    int ok = 0;
    if (PyLong_CheckExact(v)) {
        int of = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &of);
        if (x == -1 && PyErr_Occurred()) { Py_DECREF(v); return -1; }
        if (!of) {
            out->is_int = 1; out->i = x; out->f = 0.0;
            *asf = PyLong_AsDouble(v);            /* Python's int -> float */
            ok = 1;
        }
    } else if (PyFloat_CheckExact(v)) {
        out->is_int = 0; out->i = 0; out->f = PyFloat_AS_DOUBLE(v);
        *asf = out->f;
        ok = 1;
    }
    Py_DECREF(v);
    if (ok && !isfinite(*asf)) ok = 0;
    return ok;
}

/* a divisor p.<name> * scale: finite and > 0 */
static int get_div(PyObject *p, const char *name, double scale, double *out) {
    Num n;
    double f;
    int r = get_num(p, name, &n, &f);
    if (r <= 0) return r;
    *out = f * scale;
    return isfinite(*out) && *out > 0.0;
}

/* dispatch / demand not replaced on the instance: 1 plain, 0 not, -1 */
static int plain_methods(PyObject *tl) {
    static const char *names[2] = {"dispatch", "demand"};
    for (int i = 0; i < 2; i++) {
        PyObject *f = PyObject_GetAttrString(s_timeline_type, names[i]);
        PyObject *m = f ? PyObject_GetAttrString(tl, names[i]) : NULL;
        int ok = m && PyMethod_Check(m) && PyMethod_GET_FUNCTION(m) == f && PyMethod_GET_SELF(m) == tl;
        Py_XDECREF(f);
        Py_XDECREF(m);
        if (PyErr_Occurred()) return -1;
        if (!ok) return 0;
    }
    return 1;
}

/* the arrival dict into the map (cleared first): 1, 0 not one held, -1 */
static int read_arrival(TL *T, PyObject *a) {
    ar_clear(T);
    Py_CLEAR(T->arr_obj);
    T->arr_pruned = 0;
    if (!PyDict_CheckExact(a)) return 0;
    Py_INCREF(a);
    T->arr_obj = a;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(a, &pos, &k, &v)) {
        if (!PyTuple_CheckExact(k) || PyTuple_GET_SIZE(k) != 2 || !PyFloat_CheckExact(v) ||
                !isfinite(PyFloat_AS_DOUBLE(v)))
            return 0;
        PyObject *lo = PyTuple_GET_ITEM(k, 0), *eo = PyTuple_GET_ITEM(k, 1);
        if (!PyLong_CheckExact(lo) || !PyLong_CheckExact(eo)) return 0;
        int o1 = 0, o2 = 0;
        long l = PyLong_AsLongAndOverflow(lo, &o1), e = PyLong_AsLongAndOverflow(eo, &o2);
        if (PyErr_Occurred()) return -1;
        if (o1 || o2 || l < 0 || l >= T->L || e < 0 || e >= T->E) return 0;
        ar_set(T, l * T->E + e, PyFloat_AS_DOUBLE(v));
    }
    return 1;
}

/* the whole state from the Python object: 1 read, 0 not one held, -1 */
static int tl_read(TL *T) {
    PyObject *tl = T->tl;
    if ((PyObject *)Py_TYPE(tl) != s_timeline_type) return 0;
    int pm = plain_methods(tl);
    if (pm <= 0) return pm;
    static const char *clocks[7] = {"now", "link_free", "stall_ms", "transfer_ms", "gpu_ms", "cpu_ms",
                                    "cpu_wait_ms"};
    double *cdst[7] = {&T->now, &T->link, &T->stall_ms, &T->transfer_ms, &T->gpu_ms, &T->cpu_ms,
                       &T->cpu_wait_ms};
    for (int i = 0; i < 7; i++) {
        int r = get_finite(tl, clocks[i], cdst[i]);
        if (r <= 0) return r;
    }
    static const char *units[4] = {"_t_xfer", "_gpu1", "_cpu1", "_dense1"};
    double *udst[4] = {&T->txf, &T->gpu1, &T->cpu1, &T->dense1};
    for (int i = 0; i < 4; i++) {
        int r = get_finite(tl, units[i], udst[i]);
        if (r <= 0) return r;
    }
    PyObject *v = attr(tl, "overlap");
    if (!v) return -1;
    int ok = PyBool_Check(v) || PyLong_CheckExact(v);
    if (ok) T->overlap = PyObject_IsTrue(v);      /* (an exact int or a bool: no Python code) */
    Py_DECREF(v);
    if (!ok) return 0;
    /* transfers and bytes */
    v = attr(tl, "transfers");
    if (!v) return -1;
    if (!PyLong_CheckExact(v)) { Py_DECREF(v); return 0; }
    Py_XSETREF(T->transfers0, v);
    T->transfers_d.hi = T->transfers_d.lo = 0;
    v = attr(tl, "bytes");
    if (!v) return -1;
    if (PyFloat_CheckExact(v)) {
        T->bytes_float = 1;
        T->bytes_f = PyFloat_AS_DOUBLE(v);
        Py_CLEAR(T->bytes0);
        Py_DECREF(v);
    } else if (PyLong_CheckExact(v)) {
        T->bytes_float = 0;
        Py_XSETREF(T->bytes0, v);
        T->bytes0_f = PyLong_AsDouble(v);        /* what an int + float converts */
        if (T->bytes0_f == -1.0 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
            PyErr_Clear();
            T->bytes0_f = (double)INFINITY;      /* (an OverflowError in Python: refused below) */
        }
    } else { Py_DECREF(v); return 0; }
    T->bytes_d.hi = T->bytes_d.lo = 0;
    /* the costs */
    PyObject *c = attr(tl, "c");
    if (!c) return -1;
    PyObject *p = NULL;
    int r = 0;
    if ((PyObject *)Py_TYPE(c) != s_costs_type) goto out;
    if (!(p = attr(c, "profile"))) { r = -1; goto out; }
    if ((PyObject *)Py_TYPE(p) != s_profile_type) goto out;
    Num eb, kl;
    double ebf, klf, dbf, ff, hbm_div, cpu_mem_div;
    if ((r = get_num(c, "expert_bytes", &eb, &ebf)) <= 0) goto out;
    if (eb.is_int && eb.i < 0) { r = 0; goto out; }
    if (!eb.is_int && !T->bytes_float && !isfinite(T->bytes0_f)) { r = 0; goto out; }
    if ((r = get_num(c, "expert_flops_per_token", &T->flops, &ff)) <= 0) goto out;
    if ((r = get_num(c, "dense_bytes_per_layer", &T->dense_bytes, &dbf)) <= 0) goto out;
    if ((r = get_num(p, "kernel_launch_us", &kl, &klf)) <= 0) goto out;
    if ((r = get_div(p, "hbm_gbps", 1e9, &hbm_div)) <= 0) goto out;
    if ((r = get_div(p, "gpu_tflops", 1e12, &T->gpu_div)) <= 0) goto out;
    if ((r = get_div(p, "cpu_mem_gbps", 1e9, &cpu_mem_div)) <= 0) goto out;
    if ((r = get_div(p, "cpu_gflops", 1e9, &T->cpu_div)) <= 0) goto out;
    T->eb_int = eb.is_int;
    T->eb_i = eb.i;
    T->eb_f = eb.f;
    T->launch = klf * 1e-3;
    T->gpu_mem = ebf / hbm_div * 1e3;
    T->cpu_mem = ebf / cpu_mem_div * 1e3;
    T->dense_mem = dbf / hbm_div * 1e3;
    r = isfinite(T->launch) && isfinite(T->gpu_mem) && isfinite(T->cpu_mem) && isfinite(T->dense_mem);
    if (!r) goto out;
    /* the late prefetches: an int, and a dict of exact int layers in range to exact ints */
    v = attr(tl, "late");
    if (!v) { r = -1; goto out; }
    if (!PyLong_CheckExact(v)) { Py_DECREF(v); r = 0; goto out; }
    Py_XSETREF(T->late0, v);
    v = attr(tl, "late_layers");
    if (!v) { r = -1; goto out; }
    if (!PyDict_CheckExact(v)) { Py_DECREF(v); r = 0; goto out; }
    {
        Py_ssize_t pos = 0;
        PyObject *k, *x;
        while (PyDict_Next(v, &pos, &k, &x)) {
            int of = 0;
            long l = PyLong_CheckExact(k) ? PyLong_AsLongAndOverflow(k, &of) : -1;
            if (!PyLong_CheckExact(k) || of || l < 0 || l >= T->L || !PyLong_CheckExact(x)) {
                Py_DECREF(v);
                r = 0;
                goto out;
            }
        }
    }
    Py_XSETREF(T->ll_obj, v);
    T->late_d = 0;
    for (long i = 0; i < T->ll_n; i++) T->ll_d[T->ll_order[i]] = 0;
    T->ll_n = 0;
    /* the arrival map */
    v = attr(tl, "arrival");
    if (!v) { r = -1; goto out; }
    r = read_arrival(T, v);
    Py_DECREF(v);
out:
    Py_DECREF(c);
    Py_XDECREF(p);
    T->arr_dirty = 0;
    return r;
}

void tl_free(TL *T) {
    if (!T) return;
    Py_XDECREF(T->tl);
    Py_XDECREF(T->transfers0);
    Py_XDECREF(T->bytes0);
    Py_XDECREF(T->arr_obj);
    Py_XDECREF(T->late0);
    Py_XDECREF(T->ll_obj);
    free(T->arr); free(T->prev); free(T->next); free(T->late); free(T->ll_d); free(T->ll_order);
    free(T);
}

int tl_load(TL **out, PyObject *timeline, long L, long E) {
    *out = NULL;
    if (L < 1 || E < 1 || L > TL_KEYS_MAX / E) {
        PyErr_Format(PyExc_ValueError, "timeline: %ld layers x %ld experts is outside 1 .. %ld keys",
                     L, E, TL_KEYS_MAX);
        return -1;
    }
    if (import_types() < 0) return -1;
    if ((PyObject *)Py_TYPE(timeline) != s_timeline_type) return 1;
    TL *T = calloc(1, sizeof(TL));
    if (!T) { PyErr_NoMemory(); return -1; }
    T->L = L; T->E = E; T->K = L * E;
    size_t K = (size_t)T->K;
    T->arr = malloc(sizeof(double) * K);
    T->prev = malloc(sizeof(int32_t) * K);
    T->next = malloc(sizeof(int32_t) * K);
    T->late = malloc(sizeof(Late) * (size_t)E);
    T->ll_d = calloc((size_t)L, sizeof(uint64_t));
    T->ll_order = malloc(sizeof(int32_t) * (size_t)L);
    if (!T->arr || !T->prev || !T->next || !T->late || !T->ll_d || !T->ll_order) {
        tl_free(T);
        PyErr_NoMemory();
        return -1;
    }
    for (size_t k = 0; k < K; k++) T->prev[k] = ABSENT;
    T->head = T->tail = -1;
    Py_INCREF(timeline);
    T->tl = timeline;
    int r = tl_read(T);
    if (r <= 0) { tl_free(T); return r < 0 ? -1 : 1; }
    *out = T;
    return 0;
}

int tl_reload(TL *T) {
    int r = tl_read(T);
    return r < 0 ? -1 : r == 0 ? 1 : 0;
}

/* ------------------------------------------------------------------ writing it back */
static int set_float(PyObject *tl, const char *name, double x) {
    PyObject *v = PyFloat_FromDouble(x);
    if (!v) return -1;
    int r = PyObject_SetAttrString(tl, name, v);
    Py_DECREF(v);
    return r;
}

/* base + d as a Python int (a new reference; base itself when d is 0) */
static PyObject *int_plus(PyObject *base, U128 d) {
    if (!d.hi && !d.lo) { Py_INCREF(base); return base; }
    PyObject *dv = u128_to_py(d);
    if (!dv) return NULL;
    PyObject *r = PyNumber_Add(base, dv);
    Py_DECREF(dv);
    return r;
}

static PyObject *arrival_dict(const TL *T) {
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    for (int32_t k = T->head; k >= 0; k = T->next[k]) {
        PyObject *key = Py_BuildValue("(ll)", (long)(k / T->E), (long)(k % T->E));
        PyObject *v = key ? PyFloat_FromDouble(T->arr[k]) : NULL;
        int r = v ? PyDict_SetItem(d, key, v) : -1;
        Py_XDECREF(key); Py_XDECREF(v);
        if (r < 0) { Py_DECREF(d); return NULL; }
    }
    return d;
}

int tl_store(TL *T) {
    PyObject *tl = T->tl;
    /* everything Python objects are made of first (that is where it can fail), then set */
    PyObject *arrival = NULL, *transfers = NULL, *bytes = NULL, *late = NULL, *ll = NULL;
    if ((T->arr_dirty || T->arr_pruned) && !(arrival = arrival_dict(T))) return -1;
    if (!(transfers = int_plus(T->transfers0, T->transfers_d))) goto fail;
    {
        U128 d = {0, T->late_d};
        if (!(late = int_plus(T->late0, d))) goto fail;
    }
    if (T->ll_n) {           /* a copy of the dict with the new counts, layers in Python's order */
        if (!(ll = PyDict_Copy(T->ll_obj))) goto fail;
        for (long i = 0; i < T->ll_n; i++) {
            long l = T->ll_order[i];
            PyObject *key = PyLong_FromLong(l), *old = NULL, *nv = NULL;
            if (key) old = PyDict_GetItemWithError(ll, key);
            if (key && (old || !PyErr_Occurred())) {
                U128 d = {0, T->ll_d[l]};
                PyObject *zero = old ? NULL : PyLong_FromLong(0);
                if (old || zero) nv = int_plus(old ? old : zero, d);
                Py_XDECREF(zero);
            }
            int rc = nv ? PyDict_SetItem(ll, key, nv) : -1;
            Py_XDECREF(key); Py_XDECREF(nv);
            if (rc < 0) goto fail;
        }
    }
    bytes = T->bytes_float ? PyFloat_FromDouble(T->bytes_f) : int_plus(T->bytes0, T->bytes_d);
    if (!bytes) goto fail;
    if (set_float(tl, "now", T->now) < 0 || set_float(tl, "link_free", T->link) < 0 ||
            set_float(tl, "stall_ms", T->stall_ms) < 0 || set_float(tl, "transfer_ms", T->transfer_ms) < 0 ||
            set_float(tl, "gpu_ms", T->gpu_ms) < 0 || set_float(tl, "cpu_ms", T->cpu_ms) < 0 ||
            set_float(tl, "cpu_wait_ms", T->cpu_wait_ms) < 0 ||
            PyObject_SetAttrString(tl, "transfers", transfers) < 0 ||
            PyObject_SetAttrString(tl, "bytes", bytes) < 0 ||
            PyObject_SetAttrString(tl, "late", late) < 0)
        goto fail;
    if (ll) {                /* the same dict, changed in place (as Python changes it) */
        PyDict_Clear(T->ll_obj);
        if (PyDict_Update(T->ll_obj, ll) < 0 || PyObject_SetAttrString(tl, "late_layers", T->ll_obj) < 0)
            goto fail;
        for (long i = 0; i < T->ll_n; i++) T->ll_d[T->ll_order[i]] = 0;
        T->ll_n = 0;
    }
    Py_XSETREF(T->late0, late);
    late = NULL;
    T->late_d = 0;
    if (arrival) {
        if (T->arr_pruned || !T->arr_obj) {      /* Python's prune made a new dict */
            if (PyObject_SetAttrString(tl, "arrival", arrival) < 0) goto fail;
            Py_INCREF(arrival);
            Py_XSETREF(T->arr_obj, arrival);
        } else {                                 /* else the same dict, changed in place */
            PyDict_Clear(T->arr_obj);
            if (PyDict_Update(T->arr_obj, arrival) < 0 ||
                    PyObject_SetAttrString(tl, "arrival", T->arr_obj) < 0)
                goto fail;
        }
        T->arr_pruned = 0;
    }
    Py_XSETREF(T->transfers0, transfers);
    T->transfers_d.hi = T->transfers_d.lo = 0;
    if (T->bytes_float) Py_DECREF(bytes);
    else {
        Py_XSETREF(T->bytes0, bytes);
        T->bytes_d.hi = T->bytes_d.lo = 0;     /* (bytes0_f: only a float expert_bytes reads it,
                                                  and then an int bytes never grows) */
    }
    Py_XDECREF(arrival);
    Py_XDECREF(ll);
    T->arr_dirty = 0;
    return 0;
fail:
    Py_XDECREF(arrival); Py_XDECREF(transfers); Py_XDECREF(bytes); Py_XDECREF(late); Py_XDECREF(ll);
    return -1;
}

/* ------------------------------------------------------------------ playing */
/* tokens x a cost number, as Python computes it (an int number: the exact product, converted
 * to a float once) */
static double mul_tokens(int64_t t, const Num *x) {
    if (!x->is_int) return (double)t * x->f;
    U128 m = u128_mul(mag64(t), mag64(x->i));
    double v = u128_to_double(m);
    return ((t < 0) != (x->i < 0) && v != 0.0) ? -v : v;
}

static inline double pymax(double a, double b) { return b > a ? b : a; }   /* max(a, b) */

static double gpu_expert_ms(const TL *T, int64_t n) {
    double flop = mul_tokens(n, &T->flops) / T->gpu_div * 1e3;
    return T->launch + pymax(T->gpu_mem, flop);
}

static double cpu_expert_ms(const TL *T, int64_t n) {
    double flop = mul_tokens(n, &T->flops) / T->cpu_div * 1e3;
    return pymax(T->cpu_mem, flop);
}

static double dense_ms(const TL *T, int64_t n) {
    double flop = mul_tokens(n, &T->dense_bytes) / T->gpu_div * 1e3;
    return pymax(T->dense_mem, flop);
}

/* nx transfers more: transfers += nx; bytes += nx * expert_bytes, as Python adds them */
static void count(TL *T, uint64_t nx) {
    U128 one = {0, nx};
    u128_add(&T->transfers_d, one);
    if (T->eb_int) {
        U128 b = u128_mul(nx, (uint64_t)T->eb_i);
        if (!T->bytes_float) { u128_add(&T->bytes_d, b); return; }
        T->bytes_f += u128_to_double(b);               /* float + int */
        return;
    }
    double x = (double)nx * T->eb_f;                   /* int * float */
    if (!T->bytes_float) {                             /* int + float: the int converted */
        /* (bytes_d is 0: an int bytes only grows with an int expert_bytes) */
        T->bytes_f = T->bytes0_f + x;
        T->bytes_float = 1;
        return;
    }
    T->bytes_f += x;
}

/* Timeline.demand */
static double demand(TL *T, long n, long m, double dense) {
    double gpu1 = T->gpu1;
    double t0 = T->now + dense;
    double busy = (double)n * gpu1;
    double t = t0 + busy;
    if (m) {
        double txf = T->txf, link = T->link;
        double s0 = t0 > link ? t0 : link;
        link = s0 + (double)m * txf;
        double last;
        if (!T->overlap) last = link + busy;
        else if (txf >= gpu1) last = link + gpu1;
        else last = s0 + txf + (double)m * gpu1;
        if (last > t) t = last;
        T->link = link;
        count(T, (uint64_t)m);
        T->transfer_ms += (double)m * txf;
    }
    double stall = t - t0 - busy;
    T->gpu_ms += busy + dense;
    T->stall_ms += stall;
    T->now = t;
    return stall;
}

double tl_play(TL *T, const PlanRec *p, int64_t tokens, const int64_t *tokens_of) {
    long n = p->n, nl = p->nloads;
    double dense = tokens == 1 ? T->dense1 : dense_ms(T, tokens);
    if (!T->na && !tokens_of) {
        long nfalse = 0, ns = 0;
        int cpu = 0;
        for (long i = 0; i < n; i++) {
            nfalse += !p->hit[i];
            ns += p->where[i] == W_STREAM;
            cpu |= p->where[i] == W_CPU;
        }
        if (!cpu && nl + ns == nfalse)      /* every miss a demand load or a stream */
            return demand(T, n, nl + ns, dense);
    }
    double t0 = T->now + dense, txf = T->txf, link = T->link, gpu1 = T->gpu1, cpu1 = T->cpu1;
    uint64_t nx = 0;
    double early = 0.0, cpu_busy = 0.0;
    int unsorted = 0;
    long nlate = 0;
    uint64_t n_inflight = 0;           /* hits still in flight at t0: late prefetches */
    Late *late = T->late;
    long base = p->layer * T->E;
    for (long i = 0; i < n; i++) {
        long wv = p->where[i];
        int64_t nt = tokens_of ? tokens_of[i] : 1;
        if (wv == W_CPU) {
            cpu_busy += nt == 1 ? cpu1 : cpu_expert_ms(T, nt);
            continue;
        }
        double comp = nt == 1 ? gpu1 : gpu_expert_ms(T, nt);
        long k = base + p->experts[i];
        double ready;
        if (p->hit[i]) {
            ready = ar_has(T, k) ? T->arr[k] : 0.0;
            n_inflight += ready > t0;
        } else if (wv == W_STREAM || !ar_has(T, k)) {           /* a demand load or a stream */
            link = (t0 > link ? t0 : link) + txf;
            nx++;
            ready = link;
        } else ready = T->arr[k];      /* a miss already in flight */
        if (ready <= t0) early += comp;
        else {
            if (nlate && ready < late[nlate - 1].ready) unsorted = 1;
            late[nlate].ready = ready;
            late[nlate].comp = comp;
            nlate++;
        }
    }
    /* background loads start with the dispatch (the CPU computes meanwhile) */
    for (long i = 0; i < nl; i++) {
        if (p->loads[i].kind != PK_BACKGROUND) continue;
        link = (t0 > link ? t0 : link) + txf;
        nx++;
        ar_set(T, p->loads[i].key, link);
    }
    double busy = early, t;
    if (!nlate) t = t0 + early;
    else if (T->overlap) {
        if (unsorted) {     /* late.sort(): a stable sort on (ready, comp), a total order here */
            for (long i = 1; i < nlate; i++) {
                Late x = late[i];
                long j = i;
                while (j > 0 && (x.ready < late[j - 1].ready ||
                                 (x.ready == late[j - 1].ready && x.comp < late[j - 1].comp))) {
                    late[j] = late[j - 1];
                    j--;
                }
                late[j] = x;
            }
        }
        t = t0 + early;
        for (long i = 0; i < nlate; i++) {
            if (late[i].ready > t) t = late[i].ready;
            t += late[i].comp;
            busy += late[i].comp;
        }
    } else {
        double last = late[0].ready;       /* max(r for r, _ in late) */
        for (long i = 1; i < nlate; i++) if (late[i].ready > last) last = late[i].ready;
        PySum s;                           /* sum(comp for _, comp in late) */
        pysum_init(&s);
        for (long i = 0; i < nlate; i++) pysum_add(&s, late[i].comp);
        busy += pysum_value(&s);
        t = last + busy;
    }
    double stall = t - t0 - busy;
    double cpu_end = t0 + cpu_busy;
    double end = t >= cpu_end ? t : cpu_end;
    if (cpu_busy != 0.0) {
        T->cpu_wait_ms += end - t;
        T->cpu_ms += cpu_busy;
    }
    T->gpu_ms += busy + dense;
    T->stall_ms += stall;
    /* prefetches are issued when the dispatch ends */
    for (long i = 0; i < nl; i++) {
        if (p->loads[i].kind != PK_PREFETCH) continue;
        link = (end > link ? end : link) + txf;
        nx++;
        ar_set(T, p->loads[i].key, link);
    }
    if (T->na) {
        for (long i = 0; i < p->nevicted; i++) ar_pop(T, p->evicted[i].key);
        if (T->na > 4096) {                /* forget transfers that have long landed */
            for (int32_t k = T->head; k >= 0;) {
                int32_t nk = T->next[k];
                if (!(T->arr[k] > end)) ar_pop(T, k);
                k = nk;
            }
            T->arr_pruned = 1;             /* (a new dict in Python) */
        }
    }
    T->link = link;
    if (n_inflight) {
        long l = p->layer;
        T->late_d += n_inflight;
        if (!T->ll_d[l]) T->ll_order[T->ll_n++] = (int32_t)l;
        T->ll_d[l] += n_inflight;
    }
    if (nx) {
        count(T, nx);
        T->transfer_ms += (double)nx * txf;
    }
    T->now = end;
    return stall;
}
