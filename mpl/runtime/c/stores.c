/* The eviction rules of the compiled engine by name: one table of every rule's ops (the
 * rules of the Python registry, mpl.runtime.eviction.RULES, in its order), store_make and
 * store_free, and what the module gives Python of them: rules(), STORE_PARAMS, the ST_*
 * flags and the test-only _store_run (a store driven op by op, every argument checked).
 * A new rule is a store_<family>.c file with its ops table, and one line in RULE_TABLE. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>
#include <math.h>
#include <string.h>

#include "store_impl.h"

extern const StoreOps store_lru_ops, store_lfu_ops, store_score_ops,
    store_frequency_threshold_ops, store_arc_ops, store_s3fifo_ops, store_lfru_ops,
    store_least_stale_ops, store_crf_ops, store_classlru_ops, store_vllm_lfru_ops,
    store_farthest_layer_ops;

static const StoreOps *const RULE_TABLE[] = {
    &store_lru_ops, &store_lfu_ops, &store_score_ops, &store_frequency_threshold_ops,
    &store_arc_ops, &store_s3fifo_ops, &store_lfru_ops, &store_least_stale_ops,
    &store_crf_ops, &store_classlru_ops, &store_vllm_lfru_ops, &store_farthest_layer_ops,
};

#define NRULES ((int)(sizeof(RULE_TABLE) / sizeof(RULE_TABLE[0])))

int store_rule_count(void) { return NRULES; }

const StoreOps *store_rule_at(int i) { return i >= 0 && i < NRULES ? RULE_TABLE[i] : NULL; }

const StoreOps *store_rule(const char *name) {
    for (int i = 0; i < NRULES; i++)
        if (strcmp(RULE_TABLE[i]->name, name) == 0) return RULE_TABLE[i];
    return NULL;
}

/* the schema's names of the SP_* parameters, in code order */
static const char *const PARAM_NAMES[SP_COUNT] = {
    "cache.frequency_decay", "cache.decay_interval", "cache.freq_threshold",
    "cache.freq_window", "cache.score_ema_alpha", "cache.crf_half_life",
};

/* the schema's bounds (mpl/schema.py: INTERVAL_MAX, ACCESS_WINDOW_MAX) */
#define INTERVAL_MAX 1e9
#define ACCESS_WINDOW_MAX 1e6

/* per SP_* code the schema's range ((lo, hi] or [lo, hi]), whether it takes whole numbers only, and the
 * error otherwise */
static const struct { double lo, hi; int lo_open, whole; const char *why; } PARAM_RANGE[SP_COUNT] = {
    {0.0, 1.0, 1, 0, "cache.frequency_decay must be in (0, 1]"},
    {1.0, INTERVAL_MAX, 0, 1, "cache.decay_interval must be a whole number in [1, 10^9]"},
    {0.0, 1.0, 0, 0, "cache.freq_threshold must be in [0, 1]"},
    {1.0, ACCESS_WINDOW_MAX, 0, 1, "cache.freq_window must be a whole number in [1, 10^6]"},
    {0.0, 1.0, 1, 0, "cache.score_ema_alpha must be in (0, 1]"},
    {1.0, INTERVAL_MAX, 0, 1, "cache.crf_half_life must be a whole number in [1, 10^9]"},
};

const char *store_param_error(int param, double v) {
    if (param < 0 || param >= SP_COUNT) return "no such store parameter";
    double lo = PARAM_RANGE[param].lo;        /* (NaN is in no range) */
    int ok = (PARAM_RANGE[param].lo_open ? v > lo : v >= lo) && v <= PARAM_RANGE[param].hi &&
             (!PARAM_RANGE[param].whole || v == floor(v));
    return ok ? NULL : PARAM_RANGE[param].why;
}

/* the checks of store_make's arguments: 0, or -4 */
static int make_args_ok(long cap, int klo, int khi, long L, long E, const double *params) {
    if (cap < 0 || cap > INT_MAX || L < 1 || E < 1 || L > INT_MAX / E) return 0;
    if (klo < 0 || khi <= klo || (long)khi > L * E || !params) return 0;
    for (int p = 0; p < SP_COUNT; p++)
        if (store_param_error(p, params[p])) return 0;
    return 1;
}

static int make_single(Store **out, const StoreOps *ops, long cap, int klo, int khi, long L,
                       long E, const double *params) {
    Store *s = st_zalloc(1, ops->size);
    if (!s) return -1;
    s->ops = ops;
    s->flags = ops->flags;
    s->cap = cap;
    s->klo = klo;
    s->khi = khi;
    s->L = L;
    s->E = E;
    if (ops->init(s, params) < 0) {
        store_free(s);
        return -1;
    }
    *out = s;
    return 0;
}

/* one side of "a | b", spaces around it dropped, into buf: 0, or -2 (too long to be a rule) */
static int side_name(char *buf, size_t size, const char *from, size_t n) {
    while (n && (*from == ' ' || *from == '\t')) { from++; n--; }
    while (n && (from[n - 1] == ' ' || from[n - 1] == '\t')) n--;
    if (n >= size) return -2;
    memcpy(buf, from, n);
    buf[n] = '\0';
    return 0;
}

int store_make(Store **out, const char *rule, long cap, int klo, int khi, long L, long E,
               const double *params) {
    *out = NULL;
    if (!make_args_ok(cap, klo, khi, L, E, params)) return -4;
    const char *bar = strchr(rule, '|');
    if (!bar) {
        const StoreOps *ops = store_rule(rule);
        return ops ? make_single(out, ops, cap, klo, khi, L, E, params) : -2;
    }
    char na[64], nb[64];
    if (side_name(na, sizeof na, rule, (size_t)(bar - rule)) < 0 ||
            side_name(nb, sizeof nb, bar + 1, strlen(bar + 1)) < 0)
        return -2;
    const StoreOps *oa = store_rule(na), *ob = store_rule(nb);
    if (!oa || !ob) return -2;
    if (!(oa->flags & ST_SIDE) || !(ob->flags & ST_SIDE)) return -3;
    Store *a, *b;
    if (make_single(&a, oa, cap, klo, khi, L, E, params) < 0) return -1;
    if (make_single(&b, ob, cap, klo, khi, L, E, params) < 0) {
        store_free(a);
        return -1;
    }
    return segmented_make(out, a, b);
}

void store_free(Store *s) {
    if (!s) return;
    s->ops->fini(s);
    free(s);
}

/* ================================================================ the module */
static PyObject *py_rules(PyObject *self, PyObject *unused) {
    (void)self; (void)unused;
    PyObject *out = PyTuple_New(NRULES);
    if (!out) return NULL;
    for (int i = 0; i < NRULES; i++) {
        PyObject *t = Py_BuildValue("(sI)", RULE_TABLE[i]->name, RULE_TABLE[i]->flags);
        if (!t) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, i, t);
    }
    return out;
}

/* an int argument (anything with __index__) in [lo, hi]: 0, or -1 with TypeError/ValueError */
static int arg_i64(PyObject *o, int64_t lo, int64_t hi, int64_t *out, const char *what) {
    PyObject *ix = PyNumber_Index(o);
    if (!ix) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "_store_run: %s must be an int, not %.100s", what,
                         Py_TYPE(o)->tp_name);
        }
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(ix, &overflow);
    Py_DECREF(ix);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow || v < lo || v > hi) {
        PyErr_Format(PyExc_ValueError, "_store_run: %s out of range [%lld, %lld]", what,
                     (long long)lo, (long long)hi);
        return -1;
    }
    *out = v;
    return 0;
}

/* a finite float argument */
static int arg_f64(PyObject *o, double *out, const char *what) {
    double v = PyFloat_AsDouble(o);
    if (v == -1.0 && PyErr_Occurred()) return -1;
    if (!isfinite(v)) {
        PyErr_Format(PyExc_ValueError, "_store_run: %s must be finite", what);
        return -1;
    }
    *out = v;
    return 0;
}

typedef struct {
    Store *s;
    int64_t *mark;           /* the engine's key space [0, L * E) */
    int64_t stamp;
    unsigned char *res;      /* per key of the store: resident */
    int nkeys;               /* L * E */
} Run;

static int run_key(Run *r, PyObject *o, int64_t *k, const char *what) {
    return arg_i64(o, r->s->klo, r->s->khi - 1, k, what);
}

/* the exclusion of an evict op: excl (None or keys; with `only`, None or one key) */
static int run_exclude(Run *r, PyObject *excl, int only, Exclude *x) {
    x->mark = NULL;
    x->stamp = 0;
    x->only = -1;
    if (excl == Py_None) return 0;
    int64_t k;
    if (only) {
        if (arg_i64(excl, 0, r->nkeys - 1, &k, "the excluded key") < 0) return -1;
        x->only = (int)k;
        return 0;
    }
    PyObject *t = PySequence_Tuple(excl);
    if (!t) return -1;
    int64_t stamp = r->stamp + 1;
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(t); j++) {
        if (arg_i64(PyTuple_GET_ITEM(t, j), 0, r->nkeys - 1, &k, "an excluded key") < 0) {
            Py_DECREF(t);
            return -1;
        }
        r->mark[k] = stamp;
    }
    Py_DECREF(t);
    r->stamp = stamp;
    x->mark = r->mark;
    x->stamp = stamp;
    return 0;
}

/* room for one access of k's layer, as the engine makes it before a dispatch */
static int run_prepare(Run *r, long layer, long n) {
    Store *s = r->s;
    if (s->ops->prepare && s->ops->prepare(s, layer, n) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static int arity(const char *name, Py_ssize_t got, Py_ssize_t want) {
    if (got == want) return 0;
    PyErr_Format(PyExc_ValueError, "_store_run: op %s takes %zd arguments, not %zd", name,
                 want - 1, got - 1);
    return -1;
}

/* one op -> its result (a new reference), NULL with an exception */
static PyObject *run_op(Run *r, PyObject *op) {
    Store *s = r->s;
    const StoreOps *ops = s->ops;
    Py_ssize_t n = PyTuple_GET_SIZE(op);
    if (n < 1 || !PyUnicode_Check(PyTuple_GET_ITEM(op, 0))) {
        PyErr_SetString(PyExc_TypeError, "_store_run: an op is a tuple (name, args...)");
        return NULL;
    }
    Py_ssize_t nlen;
    const char *name = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(op, 0), &nlen);
    if (!name) return NULL;
    if ((size_t)nlen != strlen(name)) name = "";       /* an embedded NUL names no op */
    PyObject *a[4] = {NULL, NULL, NULL, NULL};     /* (borrowed: op is the caller's tuple) */
    for (Py_ssize_t j = 0; j < n && j < 4; j++) a[j] = PyTuple_GET_ITEM(op, j);
    int64_t k, v;
    double w;
    if (!strcmp(name, "hit") || !strcmp(name, "miss") || !strcmp(name, "insert")) {
        int hit = name[0] == 'h';
        if (arity(name, n, 3) < 0 || run_key(r, a[1], &k, "the key") < 0 ||
                arg_f64(a[2], &w, "the weight") < 0)
            return NULL;
        if (r->res[k - s->klo] != hit) {
            PyErr_Format(PyExc_ValueError, "_store_run: %s of key %lld, which is %sresident",
                         name, (long long)k, hit ? "not " : "");
            return NULL;
        }
        if (name[0] == 'i') {
            ops->insert(s, (int)k, w);
            r->res[k - s->klo] = 1;
        } else {
            if (run_prepare(r, (long)(k / s->E), 1) < 0) return NULL;
            if (hit) ops->hit(s, (int)k, w);
            else if (s->flags & ST_NEEDS_MISS) ops->miss(s, (int)k, w);
        }
        Py_RETURN_NONE;
    }
    if (!strcmp(name, "admits")) {
        if (arity(name, n, 2) < 0 || run_key(r, a[1], &k, "the key") < 0) return NULL;
        return PyBool_FromLong((s->flags & ST_FILTERS) ? ops->admits(s, (int)k) : 1);
    }
    if (!strcmp(name, "evict")) {
        if (arity(name, n, 4) < 0) return NULL;
        int only = PyObject_IsTrue(a[3]);
        if (only < 0) return NULL;
        int64_t inc = -1;
        if (a[2] != Py_None && arg_i64(a[2], 0, r->nkeys - 1, &inc, "incoming") < 0) return NULL;
        Exclude x;
        if (run_exclude(r, a[1], only, &x) < 0) return NULL;
        int vk = ops->evict(s, &x, (int)inc);
        if (vk < 0) Py_RETURN_NONE;
        if (vk < s->klo || vk >= s->khi || !r->res[vk - s->klo] || ex_has(&x, vk)) {
            PyErr_Format(PyExc_SystemError, "_store_run: %s evicted key %d, which it may not",
                         ops->name, vk);
            return NULL;
        }
        r->res[vk - s->klo] = 0;
        return PyLong_FromLong(vk);
    }
    if (!strcmp(name, "discard")) {
        if (arity(name, n, 2) < 0 || run_key(r, a[1], &k, "the key") < 0) return NULL;
        ops->discard(s, (int)k);
        r->res[k - s->klo] = 0;
        Py_RETURN_NONE;
    }
    if (!strcmp(name, "keys")) {
        if (arity(name, n, 1) < 0) return NULL;
        long len = ops->len(s);
        int *buf = PyMem_New(int, len > 0 ? len : 1);
        if (!buf) return PyErr_NoMemory();
        long got = ops->keys(s, buf);
        PyObject *out = got == len ? PyList_New(len) : NULL;
        for (long j = 0; out && j < len; j++) {
            PyObject *x = PyLong_FromLong(buf[j]);
            if (!x) Py_CLEAR(out);
            else PyList_SET_ITEM(out, j, x);
        }
        PyMem_Free(buf);
        if (got != len && !PyErr_Occurred())
            PyErr_Format(PyExc_SystemError, "_store_run: keys() gave %ld keys, len() %ld", got, len);
        return out;
    }
    if (!strcmp(name, "len")) {
        if (arity(name, n, 1) < 0) return NULL;
        return PyLong_FromLong(ops->len(s));
    }
    if (!strcmp(name, "resize")) {
        if (arity(name, n, 2) < 0 || arg_i64(a[1], 0, INT_MAX, &v, "the capacity") < 0)
            return NULL;
        ops->resize(s, (long)v);
        Py_RETURN_NONE;
    }
    if (!strcmp(name, "set_param")) {
        if (arity(name, n, 3) < 0 || arg_i64(a[1], 0, SP_COUNT - 1, &v, "the parameter") < 0)
            return NULL;
        w = PyFloat_AsDouble(a[2]);
        if (w == -1.0 && PyErr_Occurred()) return NULL;
        const char *why = store_param_error((int)v, w);
        if (why) {
            PyErr_Format(PyExc_ValueError, "_store_run: %s", why);
            return NULL;
        }
        ops->set_param(s, (int)v, w);
        Py_RETURN_NONE;
    }
    if (!strcmp(name, "begin")) {
        int64_t layer;
        if (arity(name, n, 3) < 0 || arg_i64(a[1], INT64_MIN, INT64_MAX, &v, "the step") < 0 ||
                arg_i64(a[2], 0, s->L - 1, &layer, "the layer") < 0)
            return NULL;
        if (s->flags & ST_CLOCKED) ops->begin(s, v, (long)layer);
        Py_RETURN_NONE;
    }
    if (!strcmp(name, "prepare")) {
        int64_t layer;
        if (arity(name, n, 3) < 0 || arg_i64(a[1], 0, s->L - 1, &layer, "the layer") < 0 ||
                arg_i64(a[2], 0, LONG_MAX, &v, "the count") < 0 ||
                run_prepare(r, (long)layer, (long)v) < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    PyErr_Format(PyExc_ValueError, "_store_run: no op %.50s", name);
    return NULL;
}

PyDoc_STRVAR(store_run_doc,
"_store_run(rule, capacity, klo, khi, L, E, params, ops) -> list\n\n"
"Test only: a store of `rule` (\"lfu\", \"lfu | lru\", ...) for the keys [klo, khi) of an\n"
"L x E model, its parameters `params` (floats in STORE_PARAMS order), driven by `ops`, each a\n"
"tuple: (\"hit\", k, w), (\"miss\", k, w), (\"admits\", k), (\"evict\", excluded, incoming,\n"
"only), (\"insert\", k, w), (\"discard\", k), (\"keys\",), (\"len\",), (\"resize\", capacity),\n"
"(\"set_param\", code, v), (\"begin\", step, layer), (\"prepare\", layer, n). One result per op:\n"
"the victim (None: none), the keys, the length, admits' bool; None for the others. A hit or\n"
"a miss first prepares room for one access of its layer, as the engine must; miss, admits\n"
"and begin reach a store only where its flags call them. Every argument is checked.");

static PyObject *py_store_run(PyObject *self, PyObject *args) {
    (void)self;
    const char *rule;
    PyObject *cap_o, *klo_o, *khi_o, *L_o, *E_o, *params_o, *ops_o;
    if (!PyArg_ParseTuple(args, "sOOOOOOO:_store_run", &rule, &cap_o, &klo_o, &khi_o, &L_o,
                          &E_o, &params_o, &ops_o))
        return NULL;
    int64_t cap, klo, khi, L, E;
    if (arg_i64(cap_o, 0, INT_MAX, &cap, "capacity") < 0 ||
            arg_i64(L_o, 1, INT_MAX, &L, "L") < 0 || arg_i64(E_o, 1, INT_MAX, &E, "E") < 0)
        return NULL;
    if (L > INT_MAX / E) {
        PyErr_SetString(PyExc_ValueError, "_store_run: L * E must be at most 2**31 - 1");
        return NULL;
    }
    if (arg_i64(klo_o, 0, L * E - 1, &klo, "klo") < 0 ||
            arg_i64(khi_o, klo + 1, L * E, &khi, "khi") < 0)
        return NULL;
    double params[SP_COUNT];
    PyObject *pt = PySequence_Tuple(params_o);
    if (!pt) return NULL;
    if (PyTuple_GET_SIZE(pt) != SP_COUNT) {
        Py_DECREF(pt);
        PyErr_Format(PyExc_ValueError, "_store_run: params must hold %d values", SP_COUNT);
        return NULL;
    }
    for (int p = 0; p < SP_COUNT; p++) {
        params[p] = PyFloat_AsDouble(PyTuple_GET_ITEM(pt, p));
        if (params[p] == -1.0 && PyErr_Occurred()) {
            Py_DECREF(pt);
            return NULL;
        }
        const char *why = store_param_error(p, params[p]);
        if (why) {
            Py_DECREF(pt);
            PyErr_Format(PyExc_ValueError, "_store_run: %s", why);
            return NULL;
        }
    }
    Py_DECREF(pt);
    PyObject *opt = PySequence_Tuple(ops_o);    /* a copy: the ops cannot change under us */
    if (!opt) return NULL;
    Run r = {NULL, NULL, 0, NULL, (int)(L * E)};
    PyObject *out = NULL;
    int rc = store_make(&r.s, rule, (long)cap, (int)klo, (int)khi, (long)L, (long)E, params);
    if (rc == -2) PyErr_Format(PyExc_ValueError, "_store_run: unknown eviction rule %.100s", rule);
    else if (rc == -3)
        PyErr_Format(PyExc_ValueError, "_store_run: %.100s: a side of a segmented pair must be "
                     "a single-queue rule", rule);
    else if (rc == -4) PyErr_SetString(PyExc_ValueError, "_store_run: bad arguments");
    else if (rc < 0) PyErr_NoMemory();
    if (rc < 0) goto done;
    r.mark = PyMem_Calloc((size_t)(L * E), sizeof(int64_t));
    r.res = PyMem_Calloc((size_t)(khi - klo), 1);
    if (!r.mark || !r.res) {
        PyErr_NoMemory();
        goto done;
    }
    out = PyList_New(0);
    for (Py_ssize_t j = 0; out && j < PyTuple_GET_SIZE(opt); j++) {
        PyObject *op = PySequence_Tuple(PyTuple_GET_ITEM(opt, j));
        PyObject *res = op ? run_op(&r, op) : NULL;
        Py_XDECREF(op);
        if (!res || PyList_Append(out, res) < 0) Py_CLEAR(out);
        Py_XDECREF(res);
    }
done:
    Py_DECREF(opt);
    store_free(r.s);
    PyMem_Free(r.mark);
    PyMem_Free(r.res);
    return out;
}

static PyMethodDef store_methods[] = {
    {"rules", py_rules, METH_NOARGS,
     PyDoc_STR("rules() -> ((name, flags), ...): every eviction rule of the engine, in the "
               "Python registry's order; flags: the STORE_* bits")},
    {"_store_run", py_store_run, METH_VARARGS, store_run_doc},
    {NULL, NULL, 0, NULL},
};

int stores_init_module(PyObject *m) {
    if (PyModule_AddFunctions(m, store_methods) < 0) return -1;
    PyObject *names = PyTuple_New(SP_COUNT);
    if (!names) return -1;
    for (int p = 0; p < SP_COUNT; p++) {
        PyObject *x = PyUnicode_FromString(PARAM_NAMES[p]);
        if (!x) {
            Py_DECREF(names);
            return -1;
        }
        PyTuple_SET_ITEM(names, p, x);
    }
    if (PyModule_AddObject(m, "STORE_PARAMS", names) < 0) {
        Py_DECREF(names);
        return -1;
    }
    if (PyModule_AddIntConstant(m, "STORE_NEEDS_MISS", ST_NEEDS_MISS) < 0 ||
            PyModule_AddIntConstant(m, "STORE_FILTERS", ST_FILTERS) < 0 ||
            PyModule_AddIntConstant(m, "STORE_CLOCKED", ST_CLOCKED) < 0 ||
            PyModule_AddIntConstant(m, "STORE_SIDE", ST_SIDE) < 0 ||
            PyModule_AddIntConstant(m, "STORE_LAYERED", ST_LAYERED) < 0)
        return -1;
    return 0;
}
