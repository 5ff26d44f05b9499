/* The engine's getters: each reads what it returns into C memory under the lock, then builds
 * the Python objects with the lock released (a finalizer that an allocation runs may read
 * the runtime again, or another one). */
#include "engine.h"
#include "tiers.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

PyObject *monitor_record_dict(const Engine *o, const MonRec *x);

static PyObject *nomem(void) { return PyErr_NoMemory(); }


/* ------------------------------------------------------------------ stats */
typedef struct {
    int64_t acc, hits, evictions, loads, demand, background, pf_loads, pf_useful, cpu, streamed;
    double stall, bytes;
    long requested, num_slots;
    int64_t *l_acc, *l_hit, *caps;
    AdaptEntry *alog;
    long nalog;
} Snap;

static PyObject *engine_stats(Engine *o, PyObject *unused) {
    int how;
    long L = o->L;
    Snap s;
    memset(&s, 0, sizeof s);
    s.l_acc = malloc(sizeof(int64_t) * (size_t)L);
    s.l_hit = malloc(sizeof(int64_t) * (size_t)L);
    s.caps = calloc((size_t)L, sizeof(int64_t));
    if (!s.l_acc || !s.l_hit || !s.caps) { free(s.l_acc); free(s.l_hit); free(s.caps); return nomem(); }
    if ((how = engine_read_lock(o)) < 0) { free(s.l_acc); free(s.l_hit); free(s.caps); return NULL; }
    s.alog = o->nalog ? malloc(sizeof(AdaptEntry) * (size_t)o->nalog) : NULL;
    if (o->nalog && !s.alog) {
        engine_read_unlock(o, how);
        free(s.l_acc); free(s.l_hit); free(s.caps);
        return nomem();
    }
    if (s.alog) memcpy(s.alog, o->alog, sizeof(AdaptEntry) * (size_t)o->nalog);
    s.nalog = o->nalog;
    memcpy(s.l_acc, o->l_acc, sizeof(int64_t) * (size_t)L);
    memcpy(s.l_hit, o->l_hit, sizeof(int64_t) * (size_t)L);
    if (o->per_layer) for (long l = 0; l < L; l++) s.caps[l] = o->C[l].cap;
    else for (long k = 0; k < o->K; k++) if (o->slot[k] >= 0) s.caps[k / o->U]++;
    s.evictions = o->evictions;
    s.demand = o->demand; s.background = o->background; s.pf_loads = o->pf_loads;
    s.pf_useful = o->pf_useful; s.cpu = o->cpu_computes; s.streamed = o->streamed;
    s.stall = o->stall;
    s.requested = o->requested_slots;
    s.num_slots = o->pool_size;
    TierSnap *ts = o->tiers ? tier_snap(o) : NULL;
    engine_read_unlock(o, how);
    if (o->tiers && !ts) { free(s.l_acc); free(s.l_hit); free(s.caps); free(s.alog); return nomem(); }

    for (long l = 0; l < L; l++) { s.acc += s.l_acc[l]; s.hits += s.l_hit[l]; }
    s.loads = s.demand + s.background + s.pf_loads;
    PyObject *per = PyList_New(L), *alog = PyList_New(s.nalog), *out = NULL, *bytes = NULL;
    if (!per || !alog) goto done;
    for (long l = 0; l < L; l++) {
        PyObject *d = Py_BuildValue("{s:l,s:L,s:L,s:d,s:L}", "layer", l, "accesses", (long long)s.l_acc[l],
                                    "hits", (long long)s.l_hit[l],
                                    "hit_rate", s.l_acc[l] ? (double)s.l_hit[l] / (double)s.l_acc[l] : 0.0,
                                    "capacity", (long long)s.caps[l]);
        if (!d) goto done;
        PyList_SET_ITEM(per, l, d);
    }
    for (long j = 0; j < s.nalog; j++) {
        const AdaptEntry *x = &s.alog[j];
        PyObject *rule = PyUnicode_FromFormat("rule%d", x->rule);
        PyObject *old = x->old ? Py_NewRef(x->old) : PyLong_FromLongLong(x->old_int);
        PyObject *d = (rule && old) ? Py_BuildValue("{s:L,s:L,s:N,s:i,s:O,s:N,s:O}", "step", x->step,
                                                    "access", x->access, "rule", rule, "line", x->line,
                                                    "key", x->key, "old", old, "new", x->new_) : NULL;
        if (!d) { if (!rule || !old) { Py_XDECREF(rule); Py_XDECREF(old); } goto done; }
        PyList_SET_ITEM(alog, j, d);
    }
    bytes = PyLong_FromDouble((double)(s.loads + s.streamed) * o->expert_bytes);
    if (!bytes) goto done;
    out = Py_BuildValue(
        "{s:L,s:L,s:L,s:d,s:L,s:L,s:L,s:L,s:L,s:O,s:l,s:l,s:L,s:L,s:d,s:L,s:L,s:d,s:O,s:O}",
        "accesses", (long long)s.acc, "hits", (long long)s.hits, "misses", (long long)(s.acc - s.hits),
        "hit_rate", s.acc ? (double)s.hits / (double)s.acc : 0.0,
        "evictions", (long long)s.evictions, "loads", (long long)s.loads,
        "demand_loads", (long long)s.demand, "background_loads", (long long)s.background,
        "prefetch_loads", (long long)s.pf_loads, "bytes_loaded", bytes,
        "requested_slots", s.requested, "num_slots", s.num_slots,
        "prefetch_issued", (long long)s.pf_loads, "prefetch_useful", (long long)s.pf_useful,
        "prefetch_accuracy", s.pf_loads ? (double)s.pf_useful / (double)s.pf_loads : 0.0,
        "cpu_computes", (long long)s.cpu, "streamed", (long long)s.streamed,
        "stall_ms", s.stall, "per_layer", per, "adapt_log", alog);
    if (out && ts) {      /* memory tiers: what each tier did, and the link's bytes by precision */
        int rc = tier_stats(o, ts, s.l_hit, out);
        ts = NULL;
        if (rc < 0) Py_CLEAR(out);
    }
done:
    tier_snap_free(ts);
    Py_XDECREF(per); Py_XDECREF(alog); Py_XDECREF(bytes);
    free(s.l_acc); free(s.l_hit); free(s.caps); free(s.alog);
    return out;
}

/* ------------------------------------------------------------------ residents, capacities */
static PyObject *engine_resident(Engine *o, PyObject *unused) {
    int how;
    long K = o->K;
    int *slots = malloc(sizeof(int) * (size_t)K);
    if (!slots) return nomem();
    if ((how = engine_read_lock(o)) < 0) { free(slots); return NULL; }
    memcpy(slots, o->slot, sizeof(int) * (size_t)K);
    engine_read_unlock(o, how);
    PyObject *d = PyDict_New();
    for (long k = 0; d && k < K; k++) {
        if (slots[k] < 0) continue;
        PyObject *key = engine_key(o, k), *v = PyLong_FromLong(slots[k]);
        if (!key || !v || PyDict_SetItem(d, key, v) < 0) Py_CLEAR(d);
        Py_XDECREF(key); Py_XDECREF(v);
    }
    free(slots);
    return d;
}

static PyObject *engine_capacities(Engine *o, PyObject *unused) {
    int how;
    long n = o->ncaches;
    long *caps = malloc(sizeof(long) * (size_t)n);
    if (!caps) return nomem();
    if ((how = engine_read_lock(o)) < 0) { free(caps); return NULL; }
    for (long i = 0; i < n; i++) caps[i] = o->C[i].cap;
    engine_read_unlock(o, how);
    PyObject *l = PyList_New(n);
    for (long i = 0; l && i < n; i++) {
        PyObject *x = PyLong_FromLong(caps[i]);
        if (!x) { Py_CLEAR(l); break; }
        PyList_SET_ITEM(l, i, x);
    }
    free(caps);
    return l;
}

/* the resident keys of each cache as its store orders them, coldest first (with memory
 * tiers: each set's device cache, those with slots) */
static PyObject *engine_store_keys(Engine *o, PyObject *unused) {
    int how;
    long n = 0;
    if ((how = engine_read_lock(o)) < 0) return NULL;
    long total = 0;
    Cache **cs = malloc(sizeof(Cache *) * (size_t)o->ncaches);
    if (!cs) { engine_read_unlock(o, how); return nomem(); }
    for (long i = 0; i < o->ncaches; i++)
        if (!o->tiers || o->C[i].cap) cs[n++] = &o->C[i];
    for (long i = 0; i < n; i++) total += cs[i]->st->ops->len(cs[i]->st);
    int *keys = malloc(sizeof(int) * (size_t)(total ? total : 1));
    long *cnt = malloc(sizeof(long) * (size_t)n);
    if (!keys || !cnt) { engine_read_unlock(o, how); free(keys); free(cnt); free(cs); return nomem(); }
    long at = 0;
    for (long i = 0; i < n; i++) {
        cnt[i] = cs[i]->st->ops->keys(cs[i]->st, keys + at);
        at += cnt[i];
    }
    engine_read_unlock(o, how);
    free(cs);
    PyObject *out = PyList_New(n);
    at = 0;
    for (long i = 0; out && i < n; i++) {
        PyObject *l = PyList_New(cnt[i]);
        if (!l) { Py_CLEAR(out); break; }
        PyList_SET_ITEM(out, i, l);
        for (long j = 0; j < cnt[i]; j++) {
            PyObject *k = engine_key(o, keys[at + j]);
            if (!k) { Py_CLEAR(out); break; }
            PyList_SET_ITEM(l, j, k);
        }
        at += cnt[i];
    }
    free(keys); free(cnt);
    return out;
}

/* ------------------------------------------------------------------ monitor */
static PyObject *engine_metrics(Engine *o, PyObject *unused) {
    int how;
    if (!o->f_monitor) return PyDict_New();
    static const char *names[M_COUNT] = {"hit_rate", "miss_rate", "eviction_rate",
                                         "prefetch_accuracy", "transfer_rate", "stall_ms"};
    double v[M_COUNT];
    int none[M_COUNT];
    if ((how = engine_read_lock(o)) < 0) return NULL;
    long long n = o->macc < o->mwin ? o->macc : o->mwin;
    for (int i = 0; i < M_COUNT; i++) v[i] = metric_value(o, i, n, &none[i]);
    engine_read_unlock(o, how);
    PyObject *d = PyDict_New();
    for (int i = 0; d && i < M_COUNT; i++) {
        PyObject *x = none[i] ? Py_NewRef(Py_None) : PyFloat_FromDouble(v[i]);
        if (!x || PyDict_SetItemString(d, names[i], x) < 0) Py_CLEAR(d);
        Py_XDECREF(x);
    }
    return d;
}

static PyObject *engine_monitor_log(Engine *o, PyObject *unused) {
    int how;
    if ((how = engine_read_lock(o)) < 0) return NULL;
    long n = o->nmlog;
    MonRec *c = n ? malloc(sizeof(MonRec) * (size_t)n) : NULL;
    if (n && !c) { engine_read_unlock(o, how); return nomem(); }
    if (n) memcpy(c, o->mlog, sizeof(MonRec) * (size_t)n);
    engine_read_unlock(o, how);
    PyObject *l = PyList_New(n);
    for (long i = 0; l && i < n; i++) {
        PyObject *d = monitor_record_dict(o, &c[i]);
        if (!d) { Py_CLEAR(l); break; }
        PyList_SET_ITEM(l, i, d);
    }
    free(c);
    return l;
}

/* the adaptable parameters' values now, as the adapt log shows them (a capacity in slots) */
static PyObject *engine_values(Engine *o, PyObject *unused) {
    int how;
    PyObject *keys = PyDict_GetItemString(o->config, "plain_keys");
    if (!keys) { PyErr_SetString(PyExc_KeyError, "engine configuration: no plain_keys"); return NULL; }
    long n = o->nplain;
    PyObject **v = malloc(sizeof(PyObject *) * (size_t)(n ? n : 1));
    if (!v) return nomem();
    if ((how = engine_read_lock(o)) < 0) { free(v); return NULL; }
    memcpy(v, o->plain_now, sizeof(PyObject *) * (size_t)n);
    long cap = o->cap_param;
    engine_read_unlock(o, how);
    PyObject *d = PyDict_New();
    for (long i = 0; d && i < n; i++) {
        PyObject *x = i == o->kidx_capacity ? PyLong_FromLong(cap) : Py_NewRef(v[i]);
        if (!x || PyDict_SetItem(d, PyTuple_GET_ITEM(keys, i), x) < 0) Py_CLEAR(d);
        Py_XDECREF(x);
    }
    free(v);
    return d;
}

/* the learned predictor's state (its dump() reads it into C memory first: a dispatch of
 * another thread cannot interleave with that copy) */
static PyObject *engine_learned_dump(Engine *o, PyObject *unused) {
    int how;
    if (!o->lrn) Py_RETURN_NONE;
    if ((how = engine_read_lock(o)) < 0) return NULL;
    PyObject *lrn = Py_NewRef((PyObject *)o->lrn);
    engine_read_unlock(o, how);
    PyObject *r = PyObject_CallMethod(lrn, "dump", NULL);
    Py_DECREF(lrn);
    return r;
}

PyMethodDef engine_read_methods[] = {
    {"stats", (PyCFunction)engine_stats, METH_NOARGS, "the statistics (SPEC §5)"},
    {"resident", (PyCFunction)engine_resident, METH_NOARGS, "key -> slot of every resident key"},
    {"capacities", (PyCFunction)engine_capacities, METH_NOARGS, "the caches' capacities"},
    {"store_keys", (PyCFunction)engine_store_keys, METH_NOARGS, "per cache its keys, coldest first"},
    {"metrics", (PyCFunction)engine_metrics, METH_NOARGS, "the windowed metrics now"},
    {"monitor_log", (PyCFunction)engine_monitor_log, METH_NOARGS, "the monitor's log records"},
    {"values", (PyCFunction)engine_values, METH_NOARGS, "the adaptable parameters' values now"},
    {"learned_dump", (PyCFunction)engine_learned_dump, METH_NOARGS, "the learned predictor's state"},
    {NULL, NULL, 0, NULL},
};

/* ------------------------------------------------------------------ plain numbers */
/* one getter for the plain numbers: a field of the engine, its type, and whether a dispatch
 * changes it (then read under the lock; the shape never changes) */
enum { G_LONG, G_I64, G_DBL };
static const struct { size_t off; int type, locked; } FIELDS[] = {
    {offsetof(Engine, step), G_I64, 1}, {offsetof(Engine, stall), G_DBL, 1},
    {offsetof(Engine, pool_size), G_LONG, 0}, {offsetof(Engine, requested_slots), G_LONG, 0},
    {offsetof(Engine, L), G_LONG, 0}, {offsetof(Engine, E), G_LONG, 0}, {offsetof(Engine, top_k), G_LONG, 0},
    {offsetof(Engine, expert_bytes), G_DBL, 0},
};

static PyObject *g_field(Engine *o, void *c) {
    int how = 0, f = (int)(intptr_t)c, t = FIELDS[f].type;
    if (FIELDS[f].locked && (how = engine_read_lock(o)) < 0) return NULL;
    const char *at = (const char *)o + FIELDS[f].off;
    long long i = t == G_LONG ? *(const long *)at : t == G_I64 ? *(const int64_t *)at : 0;
    double d = t == G_DBL ? *(const double *)at : 0.0;
    if (FIELDS[f].locked) engine_read_unlock(o, how);
    return t == G_DBL ? PyFloat_FromDouble(d) : PyLong_FromLongLong(i);
}

static PyObject *g_broken(Engine *o, void *c) {
    if (!o->broken) Py_RETURN_NONE;
    return PyUnicode_FromString(o->broken);
}

#define FIELD(name, i, doc) {name, (getter)g_field, NULL, doc, (void *)(intptr_t)(i)}
PyGetSetDef engine_getset[] = {
    FIELD("step", 0, "the current step (-1 before the first dispatch)"),
    FIELD("stall", 1, "the stall reported so far, ms"),
    FIELD("num_slots", 2, "the slot pool's size"),
    FIELD("requested_slots", 3, "the slots the policy asks for"),
    FIELD("num_layers", 4, NULL), FIELD("num_experts", 5, NULL), FIELD("top_k", 6, NULL),
    FIELD("expert_bytes", 7, NULL),
    {"broken", (getter)g_broken, NULL, "why the state is incomplete, or None", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
