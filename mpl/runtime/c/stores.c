/* The eviction rules of the compiled engine by name: one table of every rule's ops (the
 * rules of the Python registry, mpl.runtime.eviction.RULES, in its order), store_make and
 * store_free, and what the module gives Python of them: rules(), STORE_PARAMS, the ST_*
 * flags and the test-only _store_run (a store driven op by op from packed records, every
 * argument, victim and keys() checked).
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

/* per SP_* code the schema's range of that parameter (mpl.schema, read when the module is
 * initialised: the schema is the one place a parameter's range is written), whether it takes
 * whole numbers only, and the error otherwise */
static struct { double lo, hi; int lo_open, hi_open, whole; char why[160]; } PARAM_RANGE[SP_COUNT];

const char *store_param_error(int param, double v) {
    if (param < 0 || param >= SP_COUNT) return "no such store parameter";
    double lo = PARAM_RANGE[param].lo, hi = PARAM_RANGE[param].hi;   /* (NaN is in no range) */
    int ok = (PARAM_RANGE[param].lo_open ? v > lo : v >= lo) &&
             (PARAM_RANGE[param].hi_open ? v < hi : v <= hi) &&
             (!PARAM_RANGE[param].whole || v == floor(v));
    return ok ? NULL : PARAM_RANGE[param].why;
}

/* attribute `name` of p as a double (*d) or a truth (*t): 0, or -1 with an exception */
static int attr_of(PyObject *p, const char *name, double *d, int *t) {
    PyObject *v = PyObject_GetAttrString(p, name);
    if (!v) return -1;
    if (d) *d = PyFloat_AsDouble(v);
    if (t) *t = PyObject_IsTrue(v);
    Py_DECREF(v);
    return PyErr_Occurred() ? -1 : 0;
}

/* PARAM_RANGE[i] from mpl.schema's parameter PARAM_NAMES[i]: 0, or -1 with an exception */
static int range_from(PyObject *schema, int i) {
    PyObject *p = PyObject_CallMethod(schema, "param", "s", PARAM_NAMES[i]);
    PyObject *text = p ? PyObject_CallMethod(p, "range_text", NULL) : NULL;
    PyObject *type = text ? PyObject_GetAttrString(p, "type") : NULL;
    const char *t = type ? PyUnicode_AsUTF8(text) : NULL;
    const char *kind = t && PyUnicode_Check(type) ? PyUnicode_AsUTF8(type) : NULL;
    int rc = -1;
    if (kind && attr_of(p, "min", &PARAM_RANGE[i].lo, NULL) == 0 &&
            attr_of(p, "max", &PARAM_RANGE[i].hi, NULL) == 0 &&
            attr_of(p, "min_open", NULL, &PARAM_RANGE[i].lo_open) == 0 &&
            attr_of(p, "max_open", NULL, &PARAM_RANGE[i].hi_open) == 0) {
        PARAM_RANGE[i].whole = strcmp(kind, "count") == 0;
        snprintf(PARAM_RANGE[i].why, sizeof PARAM_RANGE[i].why, "%s must be %sin %s",
                 PARAM_NAMES[i], PARAM_RANGE[i].whole ? "a whole number " : "", t);
        rc = 0;
    } else if (!PyErr_Occurred())
        PyErr_Format(PyExc_TypeError, "mpl.schema: %s is not a parameter the stores take", PARAM_NAMES[i]);
    Py_XDECREF(p); Py_XDECREF(text); Py_XDECREF(type);
    return rc;
}

/* the checks of store_make's arguments: 0, or -4 */
static int make_args_ok(long cap, int klo, int khi, long L, long E, long P, const double *params) {
    if (cap < 0 || cap > INT_MAX || L < 1 || E < 1 || L > INT_MAX / E || P < 1 || E % P) return 0;
    if (klo < 0 || khi <= klo || (long)khi > L * E || !params) return 0;
    for (int p = 0; p < SP_COUNT; p++)
        if (store_param_error(p, params[p])) return 0;
    return 1;
}

static int make_single(Store **out, const StoreOps *ops, long cap, int klo, int khi, long L,
                       long E, long P, const double *params) {
    Store *s = st_zalloc(1, ops->size);
    if (!s) return -1;
    s->ops = ops;
    s->flags = ops->flags;
    s->cap = cap;
    s->klo = klo;
    s->khi = khi;
    s->L = L;
    s->E = E;
    s->P = P;
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

int store_make(Store **out, const char *rule, long cap, int klo, int khi, long L, long E, long P,
               const double *params) {
    *out = NULL;
    if (!make_args_ok(cap, klo, khi, L, E, P, params)) return -4;
    const char *bar = strchr(rule, '|');
    if (!bar) {
        const StoreOps *ops = store_rule(rule);
        return ops ? make_single(out, ops, cap, klo, khi, L, E, P, params) : -2;
    }
    char na[64], nb[64];
    if (side_name(na, sizeof na, rule, (size_t)(bar - rule)) < 0 ||
            side_name(nb, sizeof nb, bar + 1, strlen(bar + 1)) < 0)
        return -2;
    const StoreOps *oa = store_rule(na), *ob = store_rule(nb);
    if (!oa || !ob) return -2;
    if (!(oa->flags & ST_SIDE) || !(ob->flags & ST_SIDE)) return -3;
    Store *a, *b;
    if (make_single(&a, oa, cap, klo, khi, L, E, P, params) < 0) return -1;
    if (make_single(&b, ob, cap, klo, khi, L, E, P, params) < 0) {
        store_free(a);
        return -1;
    }
    return segmented_make(out, a, b);
}

int store_make_weighted(Store **out, const char *const *rules, const double *weights, int n,
                        long cap, int klo, int khi, long L, long E, long P, const double *params) {
    *out = NULL;
    if (!make_args_ok(cap, klo, khi, L, E, P, params) || n < 2 || n > 8) return -4;
    for (int j = 0; j < n; j++) {
        const StoreOps *ops = store_rule(rules[j]);
        if (!ops) return -2;
        if (!(ops->flags & ST_SIDE)) return -3;
        if (!(weights[j] > 0) || !isfinite(weights[j])) return -4;
    }
    Store *parts[8];
    for (int j = 0; j < n; j++)
        if (make_single(&parts[j], store_rule(rules[j]), cap, klo, khi, L, E, P, params) < 0) {
            while (j--) store_free(parts[j]);
            return -1;
        }
    return weighted_make(out, parts, weights, n);
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

/* ------------------------------------------------------------------ the test entry point */
/* One op of _store_run, as the ops buffer holds it (native "qqqqd"). */
typedef struct { int64_t op, a, b, c; double w; } RunOp;

enum { OP_HIT, OP_MISS, OP_INSERT, OP_ADMITS, OP_EVICT, OP_DISCARD, OP_KEYS, OP_LEN, OP_RESIZE,
       OP_SET_PARAM, OP_BEGIN, OP_PREPARE };

static PyObject *run_error(PyObject *type, const char *why, long long i) {
    PyErr_Format(type, "_store_run: op %lld: %s", i, why);
    return NULL;
}

/* one op on s -> its result (a new reference), NULL with an exception; res: per key of the
 * store, resident; mark: the exclusions' marks over the nkeys keys of the model */
static PyObject *run_op(Store *s, const RunOp *o, long long i, unsigned char *res, int64_t *mark,
                        int nkeys) {
    const StoreOps *ops = s->ops;
    int64_t k = o->a;
    int in = k >= s->klo && k < s->khi;
    switch (o->op) {
    case OP_HIT: case OP_MISS: case OP_INSERT:
        if (!in) return run_error(PyExc_ValueError, "key out of range", i);
        if (!isfinite(o->w)) return run_error(PyExc_ValueError, "the weight must be finite", i);
        if (res[k - s->klo] != (o->op == OP_HIT))
            return run_error(PyExc_ValueError, o->op == OP_HIT ? "a hit of a key not resident" :
                             "a miss or an insert of a key which is resident", i);
        if (o->op == OP_INSERT) {
            ops->insert(s, (int)k, o->w);
            res[k - s->klo] = 1;
        } else if (ops->prepare && ops->prepare(s, (long)(k / s->E), 1) < 0) {
            return PyErr_NoMemory();      /* room for the access, as the engine makes it */
        } else if (o->op == OP_HIT) {
            ops->hit(s, (int)k, o->w);
        } else if (s->flags & ST_NEEDS_MISS) {
            ops->miss(s, (int)k, o->w);
        }
        Py_RETURN_NONE;
    case OP_ADMITS:
        if (!in) return run_error(PyExc_ValueError, "key out of range", i);
        return PyBool_FromLong((s->flags & ST_FILTERS) ? ops->admits(s, (int)k) : 1);
    case OP_EVICT: {            /* a: the excluded keys' bits (c 1) or the one key or -1 (c 2) */
        Exclude x = {NULL, 0, -1};
        if (o->b < -1 || o->b >= nkeys || o->c < 0 || o->c > 2 ||
                (o->c == 1 && (k < 0 || (nkeys < 63 && k >> nkeys))) ||
                (o->c == 2 && (k < -1 || k >= nkeys)))
            return run_error(PyExc_ValueError, "the incoming or excluded keys out of range", i);
        if (o->c == 2) x.only = (int)k;
        if (o->c == 1) {
            x.mark = mark;
            x.stamp = 1;
            for (int j = 0; j < nkeys; j++) mark[j] = j < 63 && (k >> j & 1);
        }
        int vk = ops->evict(s, &x, (int)o->b);
        if (vk < 0) Py_RETURN_NONE;
        if (vk < s->klo || vk >= s->khi || !res[vk - s->klo] || ex_has(&x, vk))
            return PyErr_Format(PyExc_SystemError, "_store_run: %s evicted key %d, which it may "
                                "not", ops->name, vk);
        res[vk - s->klo] = 0;
        return PyLong_FromLong(vk);
    }
    case OP_DISCARD:
        if (!in) return run_error(PyExc_ValueError, "key out of range", i);
        ops->discard(s, (int)k);
        res[k - s->klo] = 0;
        Py_RETURN_NONE;
    case OP_KEYS: {
        long len = ops->len(s);
        int *buf = PyMem_New(int, len > 0 ? len : 1);
        if (!buf) return PyErr_NoMemory();
        long got = ops->keys(s, buf);
        PyObject *out = got == len ? PyList_New(len) : NULL;
        for (long j = 0; out && j < len; j++) {
            PyObject *v = PyLong_FromLong(buf[j]);
            if (!v) Py_CLEAR(out);
            else PyList_SET_ITEM(out, j, v);
        }
        PyMem_Free(buf);
        if (got != len && !PyErr_Occurred())
            PyErr_Format(PyExc_SystemError, "_store_run: keys() gave %ld keys, len() %ld", got, len);
        return out;
    }
    case OP_LEN:
        return PyLong_FromLong(ops->len(s));
    case OP_RESIZE:
        if (k < 0 || k > INT_MAX) return run_error(PyExc_ValueError, "capacity out of range", i);
        ops->resize(s, (long)k);
        Py_RETURN_NONE;
    case OP_SET_PARAM: {
        const char *why = store_param_error(k < 0 || k >= SP_COUNT ? -1 : (int)k, o->w);
        if (why) return run_error(PyExc_ValueError, why, i);
        ops->set_param(s, (int)k, o->w);
        Py_RETURN_NONE;
    }
    case OP_BEGIN: case OP_PREPARE:
        if (o->op == OP_PREPARE ? k < 0 || k >= s->L || o->b < 0 || o->b > LONG_MAX
                                : o->b < 0 || o->b >= s->L)
            return run_error(PyExc_ValueError, "layer or count out of range", i);
        if (o->op == OP_BEGIN && (s->flags & ST_CLOCKED)) ops->begin(s, k, (long)o->b);
        if (o->op == OP_PREPARE && ops->prepare && ops->prepare(s, (long)k, (long)o->b) < 0)
            return PyErr_NoMemory();
        Py_RETURN_NONE;
    }
    return run_error(PyExc_ValueError, "no such op", i);
}

PyDoc_STRVAR(store_run_doc,
"_store_run(rule, capacity, klo, khi, L, E, params, ops) -> list\n\n"
"Test only: a store of `rule` (\"lfu\", \"lfu | lru\", ...) for the keys [klo, khi) of an\n"
"L x E model, its parameters `params` (6 floats in STORE_PARAMS order), driven by `ops`, a\n"
"bytes-like object of records (op, a, b, c, w) packed as native \"qqqqd\": hit, miss, insert\n"
"(0, 1, 2: key a, weight w), admits (3: key a), evict (4: c 0 no exclusion, c 1 the keys of\n"
"the bits of a, c 2 the one key a or -1; incoming b or -1), discard (5: key a), keys (6),\n"
"len (7), resize (8: capacity a), set_param (9: code a, value w), begin (10: step a, layer\n"
"b), prepare (11: layer a, count b). One result per op: the victim (None: none), the keys,\n"
"the length, admits' bool; None for the others. A hit or a miss first prepares room for one\n"
"access of its layer, as the engine does; miss, admits and begin reach a store only where\n"
"its flags call them. Every argument is checked, and so is every victim and keys().");

static PyObject *py_store_run(PyObject *self, PyObject *args) {
    (void)self;
    const char *rule;
    int cap, klo, khi, L, E;
    double params[SP_COUNT];
    Py_buffer ops;
    if (!PyArg_ParseTuple(args, "siiiii(dddddd)y*:_store_run", &rule, &cap, &klo, &khi, &L, &E,
                          &params[0], &params[1], &params[2], &params[3], &params[4], &params[5],
                          &ops))
        return NULL;
    Store *s = NULL;
    int64_t *mark = NULL;
    unsigned char *res = NULL;
    PyObject *out = NULL;
    int rc = store_make(&s, rule, cap, klo, khi, L, E, 1, params);
    const char *why = NULL;
    for (int p = 0; p < SP_COUNT && !why; p++) why = store_param_error(p, params[p]);
    if (rc == -2) PyErr_Format(PyExc_ValueError, "_store_run: unknown eviction rule %.100s", rule);
    else if (rc == -3)
        PyErr_Format(PyExc_ValueError, "_store_run: %.100s: a side of a segmented pair must be "
                     "a single-queue rule", rule);
    else if (rc == -4)
        PyErr_Format(PyExc_ValueError, "_store_run: %s", why ? why :
                     "capacity, L, E, klo or khi out of range");
    else if (rc < 0) PyErr_NoMemory();
    else if (ops.len % (Py_ssize_t)sizeof(RunOp))
        PyErr_SetString(PyExc_ValueError, "_store_run: ops must be whole \"qqqqd\" records");
    else if (!(mark = PyMem_Calloc((size_t)L * (size_t)E, sizeof(int64_t))) ||
             !(res = PyMem_Calloc((size_t)(khi - klo), 1)))
        PyErr_NoMemory();
    else
        out = PyList_New(0);
    Py_ssize_t n = ops.len / (Py_ssize_t)sizeof(RunOp);
    for (Py_ssize_t i = 0; out && i < n; i++) {
        RunOp o;
        memcpy(&o, (const char *)ops.buf + i * (Py_ssize_t)sizeof(RunOp), sizeof o);
        PyObject *r = run_op(s, &o, (long long)i, res, mark, L * E);
        if (!r || PyList_Append(out, r) < 0) Py_CLEAR(out);
        Py_XDECREF(r);
    }
    PyBuffer_Release(&ops);
    store_free(s);
    PyMem_Free(mark);
    PyMem_Free(res);
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
    PyObject *schema = PyImport_ImportModule("mpl.schema");
    if (!schema) return -1;
    for (int i = 0; i < SP_COUNT; i++)
        if (range_from(schema, i) < 0) {
            Py_DECREF(schema);
            return -1;
        }
    Py_DECREF(schema);
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
