/* The compiled engine: the Engine type, its construction, argument conversion, the dispatch
 * and the Plan (see engine.h). */
#include "engine.h"
#include "store_arc.h"
#include "store_heap.h"
#include "store_lru.h"
#include "store_s3fifo.h"
#include "tiers.h"

#include <structmember.h>

#include <float.h>
#include <stddef.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

PyObject *DispatchError, *ConfigError, *BusyError;
static PyObject *g_plan_type, *g_step_type, *g_logger, *s_cpu_o, *s_stream_o, *s_lower_o, *s_kind[3];

/* ------------------------------------------------------------------ the lock */
/* takes the lock (waiting with the GIL released): 0; -1 (the lock released again) when the
 * state is incomplete */
static int acquire(Engine *o, unsigned long me) {
    if (!PyThread_acquire_lock(o->lock, NOWAIT_LOCK)) {
        Py_BEGIN_ALLOW_THREADS
        PyThread_acquire_lock(o->lock, WAIT_LOCK);
        Py_END_ALLOW_THREADS
    }
    o->owner = me;
    if (!o->broken) return 0;
    engine_unlock(o);
    PyErr_Format(PyExc_RuntimeError, "this runtime's state is incomplete (%s): make a new runtime", o->broken);
    return -1;
}

int engine_lock(Engine *o, const char *what) {
    unsigned long me = PyThread_get_thread_ident();
    if (o->owner == me) {
        PyErr_Format(BusyError, "%s from inside a replay of the same runtime (a progress tick, a "
                     "logging handler or a timeline called back into it): read its statistics "
                     "there, dispatch or change it after the replay returns", what);
        return -1;
    }
    return acquire(o, me);
}

void engine_unlock(Engine *o) {
    o->owner = 0;
    PyThread_release_lock(o->lock);
}

int engine_read_lock(Engine *o) {
    unsigned long me = PyThread_get_thread_ident();
    if (o->frozen && o->owner) return 1;       /* a replay's callback runs: the state is whole */
    if (o->owner == me) {                      /* (cannot happen: no Python code runs while held) */
        PyErr_SetString(BusyError, "a read while this thread changes the runtime");
        return -1;
    }
    return acquire(o, me);
}

void engine_read_unlock(Engine *o, int how) {
    if (how == 0) engine_unlock(o);
}

void engine_broken(Engine *o, const char *why) {
    if (!o->broken) o->broken = why;
}

/* ------------------------------------------------------------------ the record */
int rec_grow_loads(Rec *r) {
    if (grow((void **)&r->loads, &r->cloads, r->nloads + 1, sizeof(PlanLoad)) < 0) { r->oom = 1; return -1; }
    return 0;
}

int rec_grow_ev(Rec *r) {
    if (grow((void **)&r->ev, &r->cev, r->nev + 1, sizeof(PlanEvict)) < 0) { r->oom = 1; return -1; }
    return 0;
}

int rec_step(Rec *r, int op, int key, int source, int target, int slot, int victim, int dtype, int kind) {
    if (r->nsteps >= r->csteps && grow((void **)&r->steps, &r->csteps, r->nsteps + 1, sizeof(PlanStep)) < 0) {
        r->oom = 1;
        return -1;
    }
    PlanStep *s = &r->steps[r->nsteps++];
    s->op = op; s->key = key; s->source = source; s->target = target;
    s->slot = slot; s->victim = victim; s->dtype = dtype; s->kind = kind;
    return 0;
}

int rec_room(Rec *r, long n) {
    if (n > r->cn) {
        long nc = r->cn ? r->cn : 16;
        while (nc < n) nc *= 2;
        if ((size_t)nc > SIZE_MAX / sizeof(long)) return -1;
        long *w = realloc(r->where, sizeof(long) * (size_t)nc);
        if (!w) return -1;
        r->where = w;
        long *x = realloc(r->experts, sizeof(long) * (size_t)nc);
        if (!x) return -1;
        r->experts = x;
        unsigned char *h = realloc(r->hit, (size_t)nc);
        if (!h) return -1;
        r->hit = h;
        r->cn = nc;
    }
    if (grow((void **)&r->loads, &r->cloads, n, sizeof(PlanLoad)) < 0 ||
            grow((void **)&r->ev, &r->cev, n, sizeof(PlanEvict)) < 0)
        return -1;
    return 0;
}

static void rec_free(Rec *r) {
    free(r->experts); free(r->where); free(r->pw); free(r->hit); free(r->loads); free(r->ev); free(r->steps);
    memset(r, 0, sizeof *r);
}

/* ------------------------------------------------------------------ configuration */
/* The configuration is a dict (mpl/runtime/compiled.py `engine_config`, the one place that
 * fills it); each reader names the key it misses. */
static PyObject *cfg_get(PyObject *cfg, const char *key) {
    PyObject *v = PyDict_GetItemString(cfg, key);
    if (!v && !PyErr_Occurred()) PyErr_Format(PyExc_KeyError, "engine configuration: no %s", key);
    return v;
}

static int cfg_ll(PyObject *cfg, const char *key, long long *out) {
    PyObject *v = cfg_get(cfg, key);
    if (!v) return -1;
    if (v == Py_None) { *out = -1; return 0; }
    *out = PyLong_AsLongLong(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int cfg_long(PyObject *cfg, const char *key, long *out) {
    long long x;
    if (cfg_ll(cfg, key, &x) < 0) return -1;
    if (x < LONG_MIN || x > LONG_MAX) { PyErr_Format(PyExc_OverflowError, "engine configuration: %s", key); return -1; }
    *out = (long)x;
    return 0;
}

static int cfg_int(PyObject *cfg, const char *key, int *out) {
    long long x;
    if (cfg_ll(cfg, key, &x) < 0) return -1;
    if (x < INT_MIN || x > INT_MAX) { PyErr_Format(PyExc_OverflowError, "engine configuration: %s", key); return -1; }
    *out = (int)x;
    return 0;
}

static int cfg_double(PyObject *cfg, const char *key, double *out) {
    PyObject *v = cfg_get(cfg, key);
    if (!v) return -1;
    if (v == Py_None) { *out = NAN; return 0; }
    *out = PyFloat_AsDouble(v);
    return (*out == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

static char *dup_str(PyObject *s) {
    const char *c = PyUnicode_AsUTF8(s);
    if (!c) return NULL;
    char *d = malloc(strlen(c) + 1);
    if (!d) { PyErr_NoMemory(); return NULL; }
    strcpy(d, c);
    return d;
}

static void *zalloc(size_t n, size_t item) {
    if (n == 0) n = 1;
    if (n > SIZE_MAX / item) return NULL;
    return calloc(n, item);
}

/* The engine's arrays in one table: where each pointer lives, its item size, its length (per
 * key, layer, expert, ...), the feature that needs it, and whether every item starts at -1
 * (else 0). An array its unit grows (Z_GROWN) is only freed here. Made by engine_build once
 * the configuration is read, freed by engine_free_state. */
enum { Z_K, Z_X, Z_L, Z_E, Z_2E, Z_POOL, Z_CACHES, Z_AFF, Z_AFF_E, Z_AFF_K, Z_AFF_TAB, Z_GROWN };   /* Z_K keys, Z_X L * E */
enum { F_ALL, F_TTL, F_PER_LAYER, F_HISTORY, F_AFFINITY, F_SIGNAL };
#define ARR(field, type, n, feat, fill) {offsetof(Engine, field), sizeof(type), n, feat, fill}
static const struct { size_t off, item; int n, feat, fill; } ARRAYS[] = {
    ARR(pinned, unsigned char, Z_K, F_ALL, 0), ARR(C, Cache, Z_CACHES, F_ALL, 0),
    ARR(slot, int, Z_K, F_ALL, -1), ARR(fstack, int, Z_POOL, F_ALL, 0),
    ARR(mark, int64_t, Z_K, F_ALL, 0), ARR(pf, unsigned char, Z_K, F_ALL, 0),
    ARR(l_acc, int64_t, Z_L, F_ALL, 0), ARR(l_hit, int64_t, Z_L, F_ALL, 0),
    /* scratch */
    ARR(wv, double, Z_E, F_ALL, 0), ARR(hv, unsigned char, Z_E, F_ALL, 0), ARR(ord, int, Z_E, F_ALL, 0),
    ARR(ex, long, Z_E, F_ALL, 0), ARR(dpos, int, Z_E, F_ALL, -1), ARR(dcnt, int, Z_E, F_ALL, 0),
    ARR(pr_at, long long, Z_L, F_ALL, -1), ARR(pr_off, long, Z_L, F_ALL, 0), ARR(pr_len, long, Z_L, F_ALL, 0),
    ARR(gates, GateArg, Z_L, F_ALL, 0),
    /* triggers, budgets */
    ARR(tprv, int, Z_K, F_TTL, 0), ARR(tnxt, int, Z_K, F_TTL, 0), ARR(tstamp, int64_t, Z_K, F_TTL, 0),
    ARR(tin, unsigned char, Z_K, F_TTL, 0),
    ARR(rb_w, double, Z_L, F_PER_LAYER, 0), ARR(rb_caps, long long, Z_L, F_PER_LAYER, 0),
    ARR(stotal, long, Z_L, F_SIGNAL, 0), ARR(sn, long, Z_L, F_SIGNAL, 0), ARR(scnt, int, Z_X, F_SIGNAL, 0),
    ARR(sprev, int, Z_X, F_SIGNAL, 0), ARR(snext, int, Z_X, F_SIGNAL, 0), ARR(sfirst, int, Z_L, F_SIGNAL, -1),
    ARR(slast, int, Z_L, F_SIGNAL, -1),
    /* prefetch: history, affinity (D = min(affinity_depth, L) distances) */
    ARR(hcnt, int, Z_X, F_HISTORY, 0), ARR(hbk, long, Z_L, F_HISTORY, 0), ARR(hdelta, int, Z_E, F_HISTORY, 0),
    ARR(htouched, int, Z_2E, F_HISTORY, 0),
    ARR(aff_n, long long, Z_AFF, F_AFFINITY, 0), ARR(aff_c, long long, Z_AFF_E, F_AFFINITY, 0),
    ARR(aff_tab, unsigned char, Z_AFF_TAB, F_AFFINITY, 0), ARR(aff_step, long long, Z_L, F_AFFINITY, 0),
    ARR(aff_has, unsigned char, Z_L, F_AFFINITY, 0), ARR(aff_last, int, Z_X, F_AFFINITY, 0),
    ARR(aff_lastn, int, Z_L, F_AFFINITY, 0), ARR(aff_best, double, Z_E, F_AFFINITY, 0),
    ARR(aff_bc, long long, Z_E, F_AFFINITY, 0), ARR(aff_bn, long long, Z_E, F_AFFINITY, 0),
    ARR(aff_top, int, Z_AFF_K, F_AFFINITY, -1), ARR(aff_topc, long long, Z_AFF_K, F_AFFINITY, 0),
    ARR(aff_cand, int, Z_E, F_AFFINITY, 0),
    /* grown by their units */
    ARR(props, int, Z_GROWN, F_ALL, 0), ARR(hsort, int, Z_GROWN, F_ALL, 0), ARR(pcn, long, Z_GROWN, F_ALL, 0),
    ARR(pr_ids, long, Z_GROWN, F_ALL, 0), ARR(alog, AdaptEntry, Z_GROWN, F_ALL, 0),
    ARR(mlog, MonRec, Z_GROWN, F_ALL, 0), ARR(ring, unsigned char, Z_GROWN, F_ALL, 0),
    ARR(events, MEvent, Z_GROWN, F_ALL, 0),
};
#define NARRAYS ((int)(sizeof(ARRAYS) / sizeof(ARRAYS[0])))

static inline void **arr_at(Engine *o, int i) { return (void **)((char *)o + ARRAYS[i].off); }

static int arrays_make(Engine *o) {
    size_t L = (size_t)o->L, E = (size_t)o->E, D = (size_t)(o->aff_depth < o->L ? o->aff_depth : o->L);
    int need[] = {1, o->f_ttl, o->per_layer, o->f_history, o->f_affinity, o->per_layer && o->f_signal};
    if (o->f_affinity && o->aff_depth < 1) { PyErr_NoMemory(); return -1; }
    for (int i = 0; i < NARRAYS; i++) {
        size_t n;
        switch (ARRAYS[i].n) {
        case Z_K: n = (size_t)o->K; break;
        case Z_X: n = L * E; break;
        case Z_L: n = L; break;
        case Z_E: n = E; break;
        case Z_2E: n = 2 * E; break;
        case Z_POOL: n = (size_t)o->pool_size; break;
        case Z_CACHES: n = (size_t)o->ncaches; break;
        case Z_AFF: n = D * L * E; break;                  /* (D <= L: <= 2^44) */
        case Z_AFF_E: n = D * L * E > SIZE_MAX / E ? SIZE_MAX : D * L * E * E; break;
        case Z_AFF_K: n = D * L * E > SIZE_MAX / AFF_KEEP ? SIZE_MAX : D * L * E * AFF_KEEP; break;
        case Z_AFF_TAB: n = D * L; break;
        default: continue;
        }
        if (!need[ARRAYS[i].feat]) continue;
        void *p = *arr_at(o, i) = zalloc(n, ARRAYS[i].item);
        if (!p) { PyErr_NoMemory(); return -1; }
        if (ARRAYS[i].fill) memset(p, 0xff, n * ARRAYS[i].item);     /* every item -1 */
    }
    return 0;
}

#define NEED(p) do { if (!(p)) { PyErr_NoMemory(); return -1; } } while (0)

/* an adapt action from (code, param, i, d, d2, flag, rule, key, plain) */
static int action_from(Action *a, PyObject *t) {
    PyObject *rule_o;
    if (!PyArg_ParseTuple(t, "iiLdd" "iOiOO", &a->code, &a->param, &a->i, &a->d, &a->d2, &a->flag,
                          &rule_o, &a->kidx, &a->key, &a->plain))
        return -1;
    if (a->code < 0 || a->code >= A_COUNT || a->param < 0 || a->param >= SP_COUNT || a->kidx < -1) {
        PyErr_SetString(PyExc_ValueError, "engine configuration: bad adapt action");
        return -1;
    }
    a->rule = NULL;
    if (rule_o != Py_None && !(a->rule = dup_str(rule_o))) return -1;
    return 0;
}

static int action_check(Engine *o, const Action *a) {
    if (a->i < -1 || a->i > ENGINE_COUNT_MAX) {
        PyErr_SetString(PyExc_ValueError, "engine configuration: an adapt action's count out of range");
        return -1;
    }
    if (a->kidx >= o->nplain) {
        PyErr_SetString(PyExc_ValueError, "engine configuration: bad adapt action key");
        return -1;
    }
    return 0;
}

static int rules_from(Engine *o, PyObject *cfg) {
    PyObject *rs = cfg_get(cfg, "rules");
    if (!rs) return -1;
    if (!PyTuple_Check(rs)) { PyErr_SetString(PyExc_TypeError, "engine configuration: rules"); return -1; }
    Py_ssize_t nr = PyTuple_GET_SIZE(rs);
    if (nr > INT_MAX / 2) { PyErr_NoMemory(); return -1; }
    o->nrules = (int)nr;
    NEED(o->rules = zalloc((size_t)nr, sizeof(Rule)));
    for (Py_ssize_t i = 0; i < nr; i++) {
        Rule *r = &o->rules[i];
        PyObject *acts;
        /* (metric, cmp, value, n, unit, inverse_of, line, actions) */
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(rs, i), "iidLiiiO!", &r->metric, &r->cmp, &r->value,
                              &r->n, &r->unit, &r->inverse, &r->line, &PyTuple_Type, &acts))
            return -1;
        if (r->metric < 0 || r->metric >= M_COUNT || r->cmp < C_LT || r->cmp > C_NE ||
                r->unit < U_ACC || r->unit > U_TOKENS || r->inverse >= nr) {
            PyErr_SetString(PyExc_ValueError, "engine configuration: bad adapt rule");
            return -1;
        }
        r->index = (int)i;
        r->partner = -1;
        r->rearm = r->inverse < 0;
        r->armed = r->inverse < 0;
        r->mark = -1;
        Py_ssize_t na = PyTuple_GET_SIZE(acts);
        if (na > INT_MAX) { PyErr_NoMemory(); return -1; }
        r->nact = (int)na;
        NEED(r->act = zalloc((size_t)na, sizeof(Action)));
        for (Py_ssize_t j = 0; j < na; j++)
            if (action_from(&r->act[j], PyTuple_GET_ITEM(acts, j)) < 0 || action_check(o, &r->act[j]) < 0)
                return -1;
    }
    for (int i = 0; i < o->nrules; i++)
        if (o->rules[i].inverse >= 0) o->rules[o->rules[i].inverse].partner = i;
    return 0;
}

static int engine_build(Engine *o, PyObject *cfg) {
    if (cfg_long(cfg, "num_layers", &o->L) < 0 || cfg_long(cfg, "num_experts", &o->E) < 0 ||
            cfg_long(cfg, "top_k", &o->top_k) < 0 || cfg_double(cfg, "expert_bytes", &o->expert_bytes) < 0)
        return -1;
    if (o->L < 1 || o->E < 1 || o->L > ENGINE_MAX_KEYS / o->E) {
        PyErr_Format(ConfigError, "%ld layers x %ld experts is beyond the compiled engine's %ld keys",
                     o->L, o->E, ENGINE_MAX_KEYS);
        return -1;
    }
    /* memory tiers that split experts: the most parts a set splits one into */
    if (cfg_long(cfg, "parts", &o->S) < 0) return -1;
    if (o->S < 1 || o->S > 64 || o->L * o->E > ENGINE_MAX_KEYS / o->S) {
        PyErr_Format(ConfigError, "%ld layers x %ld experts x %ld parts is beyond the compiled engine's %ld keys",
                     o->L, o->E, o->S, ENGINE_MAX_KEYS);
        return -1;
    }
    long L = o->L, E = o->E, K = o->K = L * E * o->S;
    o->U = E * o->S;
    o->wdef = 1.0 / (double)o->top_k;
    /* slots and caches */
    int per_layer;
    if (cfg_int(cfg, "per_layer", &per_layer) < 0 || cfg_long(cfg, "pool_size", &o->pool_size) < 0 ||
            cfg_long(cfg, "requested_slots", &o->requested_slots) < 0 || cfg_long(cfg, "capacity", &o->cap_param) < 0)
        return -1;
    o->per_layer = per_layer;
    if (o->requested_slots < 0 || o->requested_slots > ENGINE_COUNT_MAX || o->cap_param < 0 ||
            o->cap_param > ENGINE_COUNT_MAX) {
        PyErr_SetString(ConfigError, "engine configuration: a capacity out of range");
        return -1;
    }
    if (o->pool_size < 0 || o->pool_size > K || o->pool_size > INT_MAX) {
        PyErr_SetString(ConfigError, "a slot pool beyond the model's keys");
        return -1;
    }
    o->ncaches = per_layer ? L : 1;
    /* memory tiers: one cache per set of tiers (its top tier), built by tiers_build */
    PyObject *tiers = cfg_get(cfg, "tiers");
    if (!tiers) return -1;
    if (tiers != Py_None) {
        if (per_layer || !PyTuple_Check(tiers) || PyTuple_GET_SIZE(tiers) != 5 ||
                !PyTuple_Check(PyTuple_GET_ITEM(tiers, 4)) || PyTuple_GET_SIZE(PyTuple_GET_ITEM(tiers, 4)) < 1) {
            PyErr_SetString(ConfigError, "engine configuration: tiers");
            return -1;
        }
        o->ncaches = (long)PyTuple_GET_SIZE(PyTuple_GET_ITEM(tiers, 4));
        if (o->ncaches > L) { PyErr_SetString(ConfigError, "engine configuration: more sets of tiers than layers"); return -1; }
    }
    long sw = 0, mw = 0, li = 0;
    if (cfg_int(cfg, "weighted", &o->f_weighted) < 0 || cfg_int(cfg, "mode", &o->mode) < 0 ||
            cfg_double(cfg, "cpu_limit", &o->cpu_limit) < 0 || cfg_int(cfg, "priority", &o->priority) < 0)
        return -1;
    if (cfg_int(cfg, "strategy", &o->strategy) < 0 || cfg_long(cfg, "budget", &o->budget) < 0 ||
            cfg_long(cfg, "lookahead", &o->lookahead) < 0 || cfg_double(cfg, "affinity_threshold", &o->aff_thr) < 0 ||
            cfg_int(cfg, "f_prefetch", &o->f_prefetch) < 0 || cfg_int(cfg, "f_history", &o->f_history) < 0 ||
            cfg_int(cfg, "f_affinity", &o->f_affinity) < 0 || cfg_int(cfg, "f_learned", &o->f_learned) < 0 ||
            cfg_int(cfg, "f_lookahead", &o->f_lookahead) < 0 || cfg_int(cfg, "next_only", &o->next_only) < 0 ||
            cfg_long(cfg, "affinity_depth", &o->aff_depth) < 0 || cfg_long(cfg, "history_window", &o->lrn_window) < 0)
        return -1;
    if (cfg_int(cfg, "f_ttl", &o->f_ttl) < 0 || cfg_ll(cfg, "ttl_n", &o->ttl_n) < 0 ||
            cfg_int(cfg, "ttl_steps", &o->ttl_steps) < 0 || cfg_int(cfg, "f_memory", &o->f_memory) < 0 ||
            cfg_double(cfg, "memory_threshold", &o->mem_thr) < 0 ||
            cfg_double(cfg, "memory_headroom", &o->mem_headroom) < 0 ||
            cfg_double(cfg, "memory_budget", &o->mem_budget) < 0)
        return -1;
    if (per_layer) {
        if (cfg_int(cfg, "allocation", &o->allocation) < 0 || cfg_int(cfg, "f_signal", &o->f_signal) < 0 ||
                cfg_int(cfg, "f_rebalance", &o->f_rebalance) < 0 || cfg_int(cfg, "budget_derived", &o->budget_derived) < 0 ||
                cfg_ll(cfg, "total_budget", &o->total_budget) < 0 || cfg_ll(cfg, "min_capacity", &o->min_cap) < 0 ||
                cfg_ll(cfg, "max_capacity", &o->max_cap) < 0 || cfg_ll(cfg, "rebalance_interval", &o->rb_interval) < 0 ||
                cfg_long(cfg, "entropy_window", &sw) < 0)
            return -1;
        if (o->total_budget < 0 || o->total_budget > ENGINE_COUNT_MAX || o->min_cap < 0 ||
                o->min_cap > ENGINE_COUNT_MAX || o->max_cap < 0 || o->max_cap > ENGINE_COUNT_MAX ||
                o->rb_interval < 0 || o->rb_interval > ENGINE_COUNT_MAX) {
            PyErr_SetString(ConfigError, "engine configuration: a budget out of range");
            return -1;
        }
    }
    if (cfg_int(cfg, "f_monitor", &o->f_monitor) < 0 || cfg_int(cfg, "warm_on_eviction", &o->warm_on_eviction) < 0 ||
            (o->f_monitor && (cfg_long(cfg, "monitor_window", &mw) < 0 || cfg_long(cfg, "log_interval", &li) < 0)))
        return -1;
    if (arrays_make(o) < 0) return -1;
    /* pinned keys (layer * E + expert): the ids of cache.pin in every layer and the
       per-layer pins, as the layout resolved them */
    PyObject *pins = cfg_get(cfg, "pins");
    if (!pins) return -1;
    if (!PyTuple_Check(pins)) { PyErr_SetString(ConfigError, "pins must be a tuple of keys"); return -1; }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(pins); i++) {
        long k = PyLong_AsLong(PyTuple_GET_ITEM(pins, i));
        if (k == -1 && PyErr_Occurred()) return -1;
        if (k < 0 || k >= K || o->S > 1) { PyErr_SetString(ConfigError, "a pinned key beyond the layers and experts"); return -1; }
        o->pinned[k] = 1;
        o->f_pins = 1;
    }
    PyObject *caps = cfg_get(cfg, "capacities"), *rule = cfg_get(cfg, "eviction"), *sp = cfg_get(cfg, "store_params");
    if (!caps || !rule || !sp) return -1;
    if (!(o->rule = dup_str(rule))) return -1;
    if (PyTuple_GET_SIZE(sp) != SP_COUNT) { PyErr_SetString(PyExc_ValueError, "engine configuration: store_params"); return -1; }
    for (int i = 0; i < SP_COUNT; i++) {
        o->sp[i] = PyFloat_AsDouble(PyTuple_GET_ITEM(sp, i));
        if (o->sp[i] == -1.0 && PyErr_Occurred()) return -1;
    }
    if (PyTuple_GET_SIZE(caps) != o->ncaches) { PyErr_SetString(PyExc_ValueError, "engine configuration: capacities"); return -1; }
    if (tiers != Py_None && tiers_build(o, tiers) < 0) return -1;
    for (long i = 0; i < o->ncaches && tiers == Py_None; i++) {
        long cap = PyLong_AsLong(PyTuple_GET_ITEM(caps, i));
        if (cap == -1 && PyErr_Occurred()) return -1;
        if (cap < 0 || cap > INT_MAX) {      /* (the stores' range: store.h) */
            PyErr_SetString(ConfigError, "engine configuration: a capacity out of range");
            return -1;
        }
        int klo = per_layer ? (int)(i * E) : 0, khi = per_layer ? (int)((i + 1) * E) : (int)K;
        o->C[i].cap = cap;
        int rc = store_make(&o->C[i].st, o->rule, cap, klo, khi, L, o->U, o->S, o->sp);
        if (rc == -1) { PyErr_NoMemory(); return -1; }
        if (rc == -2 || rc == -3) { PyErr_Format(ConfigError, "the compiled engine has no eviction rule %R", rule); return -1; }
        if (rc < 0) { PyErr_Format(ConfigError, "engine configuration: the store parameters of %R", rule); return -1; }
    }
    for (long i = 0; i < o->pool_size; i++) o->fstack[i] = (int)(o->pool_size - 1 - i);   /* 0 on top */
    o->ftop = o->pool_size;
    if (prefetch_init(o) < 0) return -1;
    if (o->f_learned) {
        PyObject *lrn = cfg_get(cfg, "learned");
        if (!lrn) return -1;
        if (!PyObject_TypeCheck(lrn, &LearnedType) || lrn_layers((Learned *)lrn) != L || lrn_experts((Learned *)lrn) != E) {
            PyErr_SetString(PyExc_TypeError, "engine configuration: learned must be a fresh _engine.Learned of the runtime's shape");
            return -1;
        }
        Py_INCREF(lrn);
        o->lrn = (Learned *)lrn;
    }
    if (o->f_ttl) o->thead = o->ttail = -1;
    if (o->per_layer && o->f_signal && ring_init(&o->sr, L, sw) < 0) { PyErr_NoMemory(); return -1; }
    /* monitor and adapt */
    if (o->f_monitor) {
        PyObject *mets = cfg_get(cfg, "metrics");
        if (!mets) return -1;
        o->metric_names = mets;
        o->nmetrics = (int)PyTuple_GET_SIZE(mets);
        if (o->nmetrics > M_COUNT) { PyErr_SetString(PyExc_ValueError, "engine configuration: metrics"); return -1; }
        PyObject *codes = cfg_get(cfg, "metric_codes");
        if (!codes) return -1;
        for (int i = 0; i < o->nmetrics; i++) {
            o->metrics[i] = (int)PyLong_AsLong(PyTuple_GET_ITEM(codes, i));
            if (o->metrics[i] < 0 || o->metrics[i] >= M_COUNT) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "engine configuration: metric codes");
                return -1;
            }
        }
        if (monitor_init(o, mw, li) < 0) return -1;
    }
    o->warm = !o->warm_on_eviction;
    /* the adaptable parameters' values as the adapt log shows them */
    PyObject *plain = cfg_get(cfg, "plain_values");
    if (!plain) return -1;
    if (!PyTuple_Check(plain)) { PyErr_SetString(PyExc_TypeError, "engine configuration: plain_values"); return -1; }
    o->nplain = (long)PyTuple_GET_SIZE(plain);
    NEED(o->plain_now = zalloc((size_t)o->nplain, sizeof(PyObject *)));
    for (long i = 0; i < o->nplain; i++) o->plain_now[i] = PyTuple_GET_ITEM(plain, i);
    if (cfg_int(cfg, "kidx_capacity", &o->kidx_capacity) < 0 || cfg_int(cfg, "kidx_allocation", &o->kidx_allocation) < 0)
        return -1;
    if (o->f_monitor && rules_from(o, cfg) < 0) return -1;
    /* counters */
    o->step = -1;
    o->last_layer = (int64_t)1 << 60;
    if (!(o->kept = PyList_New(0))) return -1;
    o->config = cfg;
    Py_INCREF(cfg);
    return 0;
}

static void engine_free_state(Engine *o) {
    tiers_free(o);
    if (o->C) for (long i = 0; i < o->ncaches; i++) if (o->C[i].st) store_free(o->C[i].st);
    ring_free(&o->hr);
    ring_free(&o->sr);
    if (o->rules) {
        for (int i = 0; i < o->nrules; i++) {
            if (o->rules[i].act) for (int j = 0; j < o->rules[i].nact; j++) free(o->rules[i].act[j].rule);
            free(o->rules[i].act);
        }
        free(o->rules);
        o->rules = NULL;
    }
    for (int i = 0; i < NARRAYS; i++) { free(*arr_at(o, i)); *arr_at(o, i) = NULL; }
    free(o->rule);
    o->rule = NULL;
    rec_free(&o->rrec);
    Py_CLEAR(o->lrn);
    free(o->plain_now);
    o->plain_now = NULL;
    Py_CLEAR(o->config);
    Py_CLEAR(o->kept);
    if (o->ktup) {
        for (long k = 0; k < o->K; k++) Py_XDECREF(o->ktup[k]);
        free(o->ktup);
        o->ktup = NULL;
    }
}

static PyObject *engine_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *cfg;
    static char *kwlist[] = {"config", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!:Engine", kwlist, &PyDict_Type, &cfg)) return NULL;
    if (!DispatchError) {
        PyErr_SetString(PyExc_RuntimeError, "mpl.runtime._engine.setup() has not been called");
        return NULL;
    }
    Engine *o = (Engine *)type->tp_alloc(type, 0);
    if (!o) return NULL;
    o->lock = PyThread_allocate_lock();
    if (!o->lock) { Py_DECREF(o); PyErr_NoMemory(); return NULL; }
    /* the configuration is read whole before the engine is used: a copy of the dict (its
     * values are plain data that no later Python code can change under the engine) */
    PyObject *own = PyDict_Copy(cfg);
    if (!own) { Py_DECREF(o); return NULL; }
    int rc = engine_build(o, own);
    Py_DECREF(own);
    if (rc < 0) { Py_DECREF(o); return NULL; }
    return (PyObject *)o;
}

/* (no garbage-collector support: an engine refers to no object that could refer back to it) */
static void engine_dealloc(Engine *o) {
    engine_free_state(o);
    if (o->lock) PyThread_free_lock(o->lock);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

/* ------------------------------------------------------------------ arguments */
/* dispatch(layer, experts, weights=None, tokens=1, *, step=None, predictions=None), converted
 * before the lock is taken. conv_fast reads arguments of exact types that pass every check
 * (the common case) and runs no Python code; anything else goes through one Python function,
 * mpl.runtime.args.normalize (given to setup()), which converts what is usable and raises
 * DispatchError for the rest, with the pure runtime's checks, order and messages. Its result
 * is read by conv_fast again: C never trusts it beyond what conv_fast checks. */
#define NSTACK 64
typedef struct {
    PyObject *layer_o, *experts_o;    /* borrowed: the call's (or the normalized tuple's) */
    PyObject *norm;                   /* owned: normalize()'s result, or NULL */
    long layer, n;
    long *ids, cap_ids, cap_w;
    double *w;
    int has_w;
    long long tokens, step;
    /* predictions: per layer given its ids (layers in the dict's order); pl_off and pl_len
     * share pl_layer's block */
    long npl, *pl_layer, *pl_off, *pl_len, *pl_ids, cpl, cids;
    long ids_stack[NSTACK];
    double w_stack[NSTACK];
} CallArgs;

static PyObject *g_normalize;

static void call_free(CallArgs *c) {
    if (c->ids != c->ids_stack) free(c->ids);
    if (c->w != c->w_stack) free(c->w);
    free(c->pl_layer); free(c->pl_ids);
    Py_CLEAR(c->norm);
}

static int derr(const char *fmt, ...) {
    va_list va;
    va_start(va, fmt);
    PyObject *msg = PyUnicode_FromFormatV(fmt, va);
    va_end(va);
    if (msg) { PyErr_SetObject(DispatchError, msg); Py_DECREF(msg); }
    return -1;
}

/* an exact int in [lo, hi] (no Python code); 0 when it is not */
static int exact_in(PyObject *v, long long lo, long long hi, long long *out) {
    if (!PyLong_CheckExact(v)) return 0;
    int ovf;
    long long x = PyLong_AsLongLongAndOverflow(v, &ovf);
    if (ovf || x < lo || x > hi) return 0;
    *out = x;
    return 1;
}

/* exact ints in [0, E) from a list or tuple's items into ids[] (no Python code); 0 when one
 * is not */
static int exact_ids(PyObject *const *items, Py_ssize_t n, long E, long *ids) {
    for (Py_ssize_t j = 0; j < n; j++) {
        long long x;
        if (!exact_in(items[j], 0, E - 1, &x)) return 0;
        ids[j] = (long)x;
    }
    return 1;
}

/* a buffer of at least n items (a stack buffer of NSTACK first, then the heap); -1 no memory */
static int room(void **buf, void *stack, long *cap, Py_ssize_t n, size_t item) {
    if (n <= *cap) return 0;
    if (*buf != stack) free(*buf);
    *buf = ((size_t)n > SIZE_MAX / item) ? NULL : malloc(item * (size_t)n);
    if (!*buf) { *buf = stack; *cap = NSTACK; PyErr_NoMemory(); return -1; }
    *cap = (long)n;
    return 0;
}

/* 1: every argument read; 0: one needs normalize(); -1: out of memory. Runs no Python code,
 * so what it reads cannot change while it reads. */
static int conv_fast(Engine *o, CallArgs *c, PyObject *const *v) {
    long long x;
    if (!exact_in(v[0], 0, o->L - 1, &x)) return 0;
    c->layer = (long)x;
    c->layer_o = v[0];
    if (!PyList_CheckExact(v[1])) return 0;
    Py_ssize_t n = PyList_GET_SIZE(v[1]);
    if (room((void **)&c->ids, c->ids_stack, &c->cap_ids, n, sizeof(long)) < 0) return -1;
    c->n = (long)n;
    if (!exact_ids(((PyListObject *)v[1])->ob_item, n, o->E, c->ids)) return 0;
    c->experts_o = v[1];
    c->has_w = 0;
    if (v[2] && v[2] != Py_None) {
        if (!PyList_CheckExact(v[2]) || PyList_GET_SIZE(v[2]) != n) return 0;
        if (room((void **)&c->w, c->w_stack, &c->cap_w, n, sizeof(double)) < 0) return -1;
        for (Py_ssize_t j = 0; j < n; j++) {
            PyObject *f = PyList_GET_ITEM(v[2], j);
            if (!PyFloat_CheckExact(f) || !isfinite(PyFloat_AS_DOUBLE(f))) return 0;
            c->w[j] = PyFloat_AS_DOUBLE(f);
        }
        c->has_w = 1;
    }
    c->tokens = 1;
    if (v[3] && !exact_in(v[3], n == 0 ? 0 : 1, TOKENS_MAX, &c->tokens)) return 0;
    c->step = -1;
    if (v[4] && v[4] != Py_None && !exact_in(v[4], 0, STEP_MAX, &c->step)) return 0;
    c->npl = 0;
    PyObject *p = v[5];
    if (!p || p == Py_None || (PyDict_CheckExact(p) && PyDict_GET_SIZE(p) == 0)) return 1;
    if (!PyDict_CheckExact(p)) return 0;
    Py_ssize_t nl = PyDict_GET_SIZE(p), pos = 0, total = 0;
    PyObject *k, *ids;
    while (PyDict_Next(p, &pos, &k, &ids)) {
        if (!PyList_CheckExact(ids) && !PyTuple_CheckExact(ids)) return 0;
        total += PySequence_Fast_GET_SIZE(ids);
    }
    if (grow((void **)&c->pl_layer, &c->cpl, 3 * (long)nl, sizeof(long)) < 0 ||
            grow((void **)&c->pl_ids, &c->cids, (long)total, sizeof(long)) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    c->pl_off = c->pl_layer + nl;
    c->pl_len = c->pl_layer + 2 * nl;
    long off = 0;
    pos = 0;
    while (PyDict_Next(p, &pos, &k, &ids)) {
        if (!exact_in(k, 0, o->L - 1, &x)) return 0;
        Py_ssize_t m = PySequence_Fast_GET_SIZE(ids);
        if (m && !exact_ids(PySequence_Fast_ITEMS(ids), m, o->E, c->pl_ids + off)) return 0;
        c->pl_layer[c->npl] = (long)x;
        c->pl_off[c->npl] = off;
        c->pl_len[c->npl] = (long)m;
        c->npl++;
        off += (long)m;
    }
    return 1;
}

static PyObject *s_names[6];    /* "layer", "experts", "weights", "tokens", "step", "predictions" */

/* the call's arguments, by position or keyword, converted and checked */
static int conv_call(Engine *o, CallArgs *c, PyObject *const *args, size_t nargsf, PyObject *kwnames,
                     const char *fname) {
    Py_ssize_t np = PyVectorcall_NARGS(nargsf);
    PyObject *v[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    if (np > 4) {
        PyErr_Format(PyExc_TypeError, "%s() takes from 3 to 5 positional arguments but %zd were given", fname, np + 1);
        return -1;
    }
    for (Py_ssize_t i = 0; i < np; i++) v[i] = args[i];
    if (kwnames) {
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(kwnames); j++) {
            PyObject *k = PyTuple_GET_ITEM(kwnames, j);
            int at = -1;
            for (int q = 0; q < 6; q++)
                if (PyUnicode_Compare(k, s_names[q]) == 0) { at = q; break; }
            if (at < 0) {
                if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument %R", fname, k);
                return -1;
            }
            if (v[at]) { PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument %R", fname, k); return -1; }
            v[at] = args[np + j];
        }
    }
    if (!v[0] || !v[1]) {
        PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", fname, v[0] ? "experts" : "layer");
        return -1;
    }
    c->ids = c->ids_stack;
    c->w = c->w_stack;
    c->cap_ids = c->cap_w = NSTACK;
    int rc = conv_fast(o, c, v);
    if (rc != 0) return rc < 0 ? -1 : 0;
    if (!g_normalize) { PyErr_SetString(PyExc_RuntimeError, "mpl.runtime._engine.setup() was not called"); return -1; }
    PyObject *cargs[8] = {NULL, NULL, v[0], v[1], v[2] ? v[2] : Py_None, v[3], v[4] ? v[4] : Py_None,
                          v[5] ? v[5] : Py_None};
    PyObject *L = PyLong_FromLong(o->L), *E = PyLong_FromLong(o->E);
    if (L && E) {
        cargs[0] = L; cargs[1] = E;
        if (!cargs[5]) { cargs[5] = PyLong_FromLong(1); if (cargs[5]) c->norm = PyObject_Vectorcall(g_normalize, cargs, 8, NULL); Py_XDECREF(cargs[5]); }
        else c->norm = PyObject_Vectorcall(g_normalize, cargs, 8, NULL);
    }
    Py_XDECREF(L); Py_XDECREF(E);
    if (!c->norm) return -1;
    if (!PyTuple_CheckExact(c->norm) || PyTuple_GET_SIZE(c->norm) != 6) rc = 0;
    else rc = conv_fast(o, c, &PyTuple_GET_ITEM(c->norm, 0));
    if (rc == 0) PyErr_SetString(PyExc_SystemError, "mpl.runtime.args.normalize returned arguments the engine cannot read");
    return rc > 0 ? 0 : -1;
}

/* ------------------------------------------------------------------ the dispatch */
/* under the lock, no Python code: the call's converted arguments into the engine's own
 * scratch (distinct ids, the mean weight of a repeat: routing.distinct), predictions into
 * pr_*; the record sized; every table the dispatch may grow grown. 0; -1 out of memory
 * (nothing changed). */
static int prepare_call(Engine *o, const CallArgs *c, Args *a, Rec *r) {
    long n = 0;
    /* distinct ids, first occurrence kept (dpos: -1 between calls) */
    long m = 0;
    for (long j = 0; j < c->n; j++) {
        long e = c->ids[j];
        int at = o->dpos[e];
        if (at < 0) {
            o->dpos[e] = (int)m;
            o->ex[m] = e;
            if (c->has_w) { o->wv[m] = c->w[j]; o->dcnt[m] = 1; }
            m++;
        } else if (c->has_w) {
            o->wv[at] += c->w[j];
            o->dcnt[at]++;
        }
    }
    for (long q = 0; q < m; q++) o->dpos[o->ex[q]] = -1;
    if (c->has_w && m != c->n)
        for (long q = 0; q < m; q++) {
            o->wv[q] = o->wv[q] / (double)o->dcnt[q];
            if (!isfinite(o->wv[q])) {      /* the sum overflowed: routing.distinct's mean */
                double s = 0.0;
                for (long j = 0; j < c->n; j++)
                    if (c->ids[j] == o->ex[q]) s += c->w[j] / (double)o->dcnt[q];
                o->wv[q] = s;
            }
        }
    n = m;
    a->layer = c->layer;
    a->n = n;
    a->ex = o->ex;
    a->w = c->has_w ? o->wv : NULL;
    a->tokens = c->tokens;
    a->step = c->step;
    a->given = 0;
    if (c->npl) {
        long total = 0;
        for (long j = 0; j < c->npl; j++) total += c->pl_len[j];
        if (grow((void **)&o->pr_ids, &o->pr_cap, total, sizeof(long)) < 0) return -1;
        o->pr_call++;
        for (long j = 0; j < c->npl; j++) {
            long l = c->pl_layer[j];
            o->pr_at[l] = o->pr_call;
            o->pr_off[l] = c->pl_off[j];
            o->pr_len[l] = c->pl_len[j];
        }
        if (total) memcpy(o->pr_ids, c->pl_ids, sizeof(long) * (size_t)total);
        a->given = 1;
    }
    if (rec_size(r, n) < 0) return -1;
    return 0;
}

/* the step a dispatch starts (-1 with *why: the counter would pass STEP_MAX) */
static int next_step(const Engine *o, const Args *a, int64_t *out) {
    if (a->step >= 0) { *out = a->step; return 0; }
    if (a->layer <= o->last_layer) {
        if (o->step >= STEP_MAX) return -1;
        *out = o->step + 1;
    } else *out = o->step;
    return 0;
}

int engine_reserve_tables(Engine *o, const Args *a) {
    Cache *c = layer_cache(o, a->layer);
    /* (a store sees each part of an expert: up to S keys per access) */
    if (c->st->ops->prepare && c->st->ops->prepare(c->st, a->layer, a->n * o->S) < 0) return -1;
    if (o->tiers && tiers_reserve(o, a->layer, a->n) < 0) return -1;
    if (o->f_history && ring_reserve(&o->hr, a->layer, a->n) < 0) return -1;
    if (o->f_signal && ring_reserve(&o->sr, a->layer, a->n) < 0) return -1;
    if (o->f_monitor && monitor_reserve(o, a->n) < 0) return -1;
    if (prefetch_reserve(o) < 0) return -1;
    return 0;
}

/* The accesses of one dispatch in service order, the store's operations given: the
 * counters into *cnt (demand, streamed, background, cpu, hits, evictions). Always inlined:
 * where dispatch_core knows the cache's rule (lru, lfu, score, arc, s3fifo) with that rule's own
 * operations and flags as constants (direct calls, inlined from store_<rule>.h), and for a
 * plain dispatch (router order, no TTL) without those branches; else with the ops table's.
 * The arrays the loop reads per access are held in locals: no store operation touches the
 * engine (store.h). */
typedef void (*HitFn)(Store *, int, double);
typedef int (*EvictFn)(Store *, const Exclude *, int);

#if defined(__GNUC__) || defined(__clang__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#elif defined(_MSC_VER)
#define ALWAYS_INLINE __forceinline
#else
#define ALWAYS_INLINE inline
#endif

static ALWAYS_INLINE void
run_accesses(Engine *o, const Args *a, Rec *r, Cache *c, Store *st, const int *ord, long base,
             const double *wv, HitFn hit, HitFn miss, EvictFn evict, HitFn insert,
             const unsigned flags, const int plain, int64_t *cnt) {
    const long n = a->n, *ex = a->ex;
    const int f_ttl = plain ? 0 : o->f_ttl;
    if (plain) ord = NULL;
    const unsigned char *pinned = o->pinned;
    int *slot = o->slot;
    unsigned char *pf = o->pf;
    long *where = r->where;
    unsigned char *rhit = r->hit;
    const double wdef = o->wdef;
    int64_t nd = 0, nst = 0, nbg = 0, ncpu = 0, nhit = 0, nev = 0;
    int first_miss = 1, to_cpu = 0;
    for (long ii = 0; ii < n; ii++) {
        long i = ord ? ord[ii] : ii;
        int k = (int)(base + ex[i]);
        double w = wv ? wv[i] : wdef;
        if (f_ttl) o->accesses++;
        int sk = slot[k];
        if (sk >= 0) {
            where[i] = sk;
            rhit[i] = 1;
            nhit++;
            if (!pinned[k]) {
                hit(st, k, w);
                if (f_ttl) ttl_touch(o, k);
            }
            if (pf[k]) { pf[k] = 0; o->pf_useful++; }
            continue;
        }
        rhit[i] = 0;
        if (first_miss) {
            first_miss = 0;
            to_cpu = o->mode == MODE_CPU || (o->mode == MODE_HYBRID && (double)a->tokens < o->cpu_limit);
        }
        if (!pinned[k] && (flags & ST_NEEDS_MISS)) miss(st, k, w);
        if (to_cpu) {
            where[i] = W_CPU;
            ncpu++;
        }
        if ((flags & ST_FILTERS) && !st->ops->admits(st, k)) {    /* the admission filter */
            if (!to_cpu) { where[i] = W_STREAM; nst++; }
            continue;
        }
        int sl, v = -1;
        if (c->nres >= c->cap || o->ftop == 0) {
            Exclude x = {o->mark, o->stamp, -1};
            v = evict(st, &x, k);
            if (v < 0) {
                if (!to_cpu) { where[i] = W_STREAM; nst++; }
                continue;
            }
            sl = slot[v];
            slot[v] = -1;
            c->nres--;
            /* (rec_size made room for one eviction and one load per access) */
            r->ev[r->nev].key = v;
            r->ev[r->nev].slot = sl;
            r->nev++;
            nev++;
            pf[v] = 0;
            if (f_ttl) ttl_unlink(o, v);
        } else sl = o->fstack[--o->ftop];
        slot[k] = sl;
        c->nres++;
        if (!pinned[k]) {
            insert(st, k, w);
            if (f_ttl) ttl_touch(o, k);
        }
        PlanLoad *ld = &r->loads[r->nloads++];
        ld->key = k; ld->slot = sl; ld->victim = v; ld->kind = to_cpu ? PK_BACKGROUND : PK_DEMAND;
        if (to_cpu) nbg++;
        else { nd++; where[i] = sl; }
    }
    cnt[0] = nd; cnt[1] = nst; cnt[2] = nbg; cnt[3] = ncpu; cnt[4] = nhit; cnt[5] = nev;
}

/* The generated dispatch, in C. The record r holds the outcome (rec_size sized it for n
 * accesses). Returns 0, or -1 when memory ran out on the way (the engine is then broken: its
 * state went on, its record did not). */
int engine_dispatch_core(Engine *o, const Args *a, Rec *r) {
    long layer = a->layer, n = a->n, E = o->E;
    const long *ex = a->ex;
    int64_t ns = o->step;
    next_step(o, a, &ns);          /* (the caller checked that it does not pass STEP_MAX) */
    o->step = ns;
    o->last_layer = layer;
    r->step = ns;
    r->layer = layer;
    r->n = n;
    Cache *c = layer_cache(o, layer);
    Store *st = c->st;
    if (st->flags & ST_CLOCKED) st->ops->begin(st, o->step, layer);
    long base = layer * E;
    const double *wv = o->f_weighted && a->w ? a->w : NULL;
    if (n) memcpy(r->experts, ex, sizeof(long) * (size_t)n);   /* the record's experts */
    mark_inuse(o, layer, ex, n);
    /* the order of service: router order, or with priority routing and weights the heaviest
     * first, equal weights in router order (the generated dispatch's stable sort) */
    const int *ord = NULL;
    if (o->priority && a->w && n > 1) {
        int *q = o->ord;
        for (long j = 0; j < n; j++) {
            long at = j;
            double wj = a->w[j];
            while (at > 0 && a->w[q[at - 1]] < wj) { q[at] = q[at - 1]; at--; }
            q[at] = (int)j;
        }
        ord = q;
    }
    int64_t cnt[6];
    const StoreOps *ops = st->ops;
    const int plain = !ord && !o->f_ttl;
#define RUN(H, M, EV, IN, FL)                                                                 \
    do {                                                                                      \
        if (plain) run_accesses(o, a, r, c, st, NULL, base, wv, H, M, EV, IN, FL, 1, cnt);    \
        else run_accesses(o, a, r, c, st, ord, base, wv, H, M, EV, IN, FL, 0, cnt);           \
    } while (0)
    const unsigned hooks = st->flags & (ST_NEEDS_MISS | ST_FILTERS);   /* (a single rule's: its ops') */
    if (o->tiers) {      /* memory tiers: the miss path consults the tiers below (tiers.c) */
        tier_begin(o, layer, ex, n);
        tier_accesses(o, a, r, ord, wv, cnt);
    } else if (ops == &store_lru_ops && hooks == 0) RUN(lru_hit, NULL, lru_evict, lru_insert, 0u);
    else if (ops == &store_arc_ops && hooks == ST_NEEDS_MISS) RUN(arc_hit, arc_miss, arc_evict, arc_insert, ST_NEEDS_MISS);
    else if (ops == &store_s3fifo_ops && hooks == 0) RUN(s3_hit, NULL, s3_evict, s3_insert, 0u);
    else if (ops == &store_lfu_ops && hooks == ST_NEEDS_MISS) RUN(lfu_hit, lfu_miss, hs_evict, lfu_insert, ST_NEEDS_MISS);
    else if (ops == &store_score_ops && hooks == 0) RUN(score_hit, NULL, hs_evict, score_insert, 0u);
    else run_accesses(o, a, r, c, st, ord, base, wv, ops->hit, ops->miss, ops->evict, ops->insert, st->flags, 0, cnt);
#undef RUN
    int64_t nd = cnt[0], nst = cnt[1], nbg = cnt[2], ncpu = cnt[3], nhit = cnt[4], nev = cnt[5];
    o->demand += nd; o->streamed += nst; o->background += nbg; o->cpu_computes += ncpu;
    o->evictions += nev;
    o->l_acc[layer] += n;
    o->l_hit[layer] += nhit;
    if (o->f_rebalance) o->dispatches++;
    if (o->f_history) history_observe(o, layer, ex, n);
    if (o->f_affinity) affinity_observe(o, layer, ex, n);
    if (o->lrn && learned_observe(o, layer, a) < 0) { engine_broken(o, "the learned predictor ran out of memory"); return -1; }
    if (o->f_signal) signal_observe(o, layer, ex, n);
    if (o->f_prefetch && o->strategy != STRAT_NONE && prefetch(o, layer, ex, n, a->given, r) < 0) {
        engine_broken(o, "memory ran out during a prefetch");
        return -1;
    }
    if (o->f_ttl && o->ttl_n >= 0) ttl_sweep(o, r);
    if (o->f_memory && !isnan(o->mem_thr) &&
            (double)(o->pool_size - o->ftop) * o->expert_bytes >= o->mem_thr * o->mem_budget)
        mem_pressure(o, r, 0);
    if (o->f_rebalance && o->rb_interval && o->dispatches % o->rb_interval == 0 && rebalance(o, r) < 0) {
        engine_broken(o, "memory ran out during a rebalance");
        return -1;
    }
    if (o->f_monitor && n && monitor_observe(o, r->hit, n, a->tokens, r) < 0) {
        engine_broken(o, "memory ran out in the monitor");
        return -1;
    }
    Cache *cc = layer_cache(o, layer);   /* (an adapt action may have rebuilt nothing: the same cache) */
    if (cc->nres > cc->cap) {
        mark_inuse(o, layer, ex, n);
        trim_cache(o, cc, r);
    }
    if (r->oom) { engine_broken(o, "memory ran out while recording a dispatch"); return -1; }
    return 0;
}

/* ------------------------------------------------------------------ the Plan */
PyObject *engine_key(Engine *o, long k) {
    if (!o->ktup && !(o->ktup = calloc((size_t)o->K, sizeof(PyObject *)))) return PyErr_NoMemory();
    PyObject *t = o->ktup[k];
    if (t) return Py_NewRef(t);
    long l = k / o->U, e = k / o->S % o->E, p = k % o->S;
    if (o->S == 1 || o->tiers->lv[o->tiers->level_of[l]].split == 1) t = Py_BuildValue("(ll)", l, e);
    else t = Py_BuildValue("(lll)", l, e, p);
    if (!t) return NULL;
    /* (holds only ints: never part of a cycle) */
    if (PyObject_GC_IsTracked(t)) PyObject_GC_UnTrack(t);
    if (o->ktup[k]) {           /* made meanwhile (a finalizer the allocation ran) */
        Py_DECREF(t);
        return Py_NewRef(o->ktup[k]);
    }
    o->ktup[k] = Py_NewRef(t);
    return t;
}

/* a list of n items for a Plan, hidden from the collector until it is filled (a finalizer
 * that an allocation runs cannot see its empty items through gc.get_objects) */
static PyObject *hidden_list(Py_ssize_t n) {
    PyObject *l = PyList_New(n);
    if (l) PyObject_GC_UnTrack(l);
    return l;
}

static void shown(PyObject *l) {
    if (l && !PyObject_GC_IsTracked(l)) PyObject_GC_Track(l);
}

/* where Plan's slots are (mpl.runtime.plan.Plan.__slots__, in its __init__'s order, then
 * _typed), read at setup(); "steps" (memory tiers' moves) is always empty here: the engine
 * holds no tiers */
#define PLAN_SLOTS 9
static const char *plan_slots[PLAN_SLOTS] = {"step", "layer", "experts", "where", "hit",
                                             "raw_loads", "evicted", "steps", "_typed"};
static Py_ssize_t plan_off[PLAN_SLOTS];

static PyObject *where_obj(long v) {
    if (v >= 0) return PyLong_FromLong(v);
    if (v == W_PARTS) return NULL;       /* (made by parts_where) */
    PyObject *x = v == W_CPU ? s_cpu_o : v == W_LOWER ? s_lower_o : s_stream_o;
    Py_INCREF(x);
    return x;
}

/* an access's place in a set of tiers that splits experts: a tuple, per part its place */
static PyObject *parts_where(Engine *o, const Rec *r, long i) {
    long N = o->tiers->lv[o->tiers->level_of[r->layer]].split;
    PyObject *t = PyTuple_New(N);
    for (long p = 0; t && p < N; p++) {
        PyObject *x = where_obj(r->pw[i * o->S + p]);
        if (!x) Py_CLEAR(t);
        else PyTuple_SET_ITEM(t, p, x);
    }
    return t;
}

/* Plan(step, layer, experts, where, hit, loads, evicted) from a record (after the lock is
 * released: the record is the call's own). experts_o: the list to show (NULL: made). */
PyObject *engine_plan_of(Engine *o, const Rec *r, PyObject *layer_o, PyObject *experts_o) {
    PyObject *where = hidden_list(r->n), *hit = hidden_list(r->n);
    PyObject *loads = hidden_list(r->nloads), *ev = hidden_list(r->nev), *ex = NULL, *res = NULL;
    if (!where || !hit || !loads || !ev) goto out;
    if (experts_o) { ex = experts_o; Py_INCREF(ex); }
    else {
        if (!(ex = hidden_list(r->n))) goto out;
        for (long i = 0; i < r->n; i++) {
            PyObject *x = PyLong_FromLong(r->experts[i]);
            if (!x) goto out;
            PyList_SET_ITEM(ex, i, x);
        }
    }
    for (long i = 0; i < r->n; i++) {
        PyObject *w = r->where[i] == W_PARTS ? parts_where(o, r, i) : where_obj(r->where[i]);
        if (!w) goto out;
        PyList_SET_ITEM(where, i, w);
        PyObject *h = r->hit[i] ? Py_True : Py_False;
        Py_INCREF(h);
        PyList_SET_ITEM(hit, i, h);
    }
    for (long j = 0; j < r->nloads; j++) {
        const PlanLoad *x = &r->loads[j];
        PyObject *k = engine_key(o, x->key), *v = NULL, *t = NULL, *sl;
        if (!k) goto out;
        if (x->victim >= 0) { if (!(v = engine_key(o, x->victim))) { Py_DECREF(k); goto out; } }
        else v = Py_NewRef(Py_None);
        if ((sl = PyLong_FromLong(x->slot))) {
            t = PyTuple_Pack(4, k, sl, v, s_kind[x->kind]);
            Py_DECREF(sl);
        }
        Py_DECREF(k); Py_DECREF(v);
        if (!t) goto out;
        PyObject_GC_UnTrack(t);            /* (ints, key tuples, None and a str: no cycle) */
        PyList_SET_ITEM(loads, j, t);
    }
    for (long j = 0; j < r->nev; j++) {
        PyObject *k = engine_key(o, r->ev[j].key), *sl = k ? PyLong_FromLong(r->ev[j].slot) : NULL;
        PyObject *t = sl ? PyTuple_Pack(2, k, sl) : NULL;
        Py_XDECREF(k); Py_XDECREF(sl);
        if (!t) goto out;
        PyObject_GC_UnTrack(t);
        PyList_SET_ITEM(ev, j, t);
    }
    {
        PyObject *layer = layer_o;
        if (!layer || !PyLong_CheckExact(layer)) layer = PyLong_FromLong(r->layer);
        else Py_INCREF(layer);
        PyObject *step = layer ? PyLong_FromLongLong((long long)r->step) : NULL;
        PyObject *steps = !step ? NULL : o->tiers ? tier_steps_list(o, r, g_step_type, s_kind) : PyList_New(0);
        if (steps) res = ((PyTypeObject *)g_plan_type)->tp_alloc((PyTypeObject *)g_plan_type, 0);
        if (!res) { Py_XDECREF(layer); Py_XDECREF(step); Py_XDECREF(steps); goto out; }
        shown(where); shown(hit); shown(loads); shown(ev); shown(ex);
        /* Plan.__init__'s assignments, in its slots (the lists are the call's own) */
        PyObject *vals[PLAN_SLOTS] = {step, layer, Py_NewRef(ex), Py_NewRef(where), Py_NewRef(hit),
                                      Py_NewRef(loads), Py_NewRef(ev), steps, Py_NewRef(Py_False)};
        for (int i = 0; i < PLAN_SLOTS; i++) *(PyObject **)((char *)res + plan_off[i]) = vals[i];
    }
out:
    Py_XDECREF(where); Py_XDECREF(hit); Py_XDECREF(loads); Py_XDECREF(ev); Py_XDECREF(ex);
    return res;
}

/* ------------------------------------------------------------------ entry points */
/* one dispatch of a call: convert, lock, run, unlock; *rec holds the outcome. 0, -1. */
static int run_call(Engine *o, PyObject *const *args, size_t nargsf, PyObject *kwnames, const char *fname,
                    CallArgs *c, Rec *r) {
    memset(c, 0, offsetof(CallArgs, ids_stack));      /* (the stack buffers need no clearing) */
    if (conv_call(o, c, args, nargsf, kwnames, fname) < 0) return -1;
    if (engine_lock(o, "a dispatch") < 0) return -1;
    Args a;
    int64_t ns = 0;
    int err = 0;   /* 1 no memory, 2 step overflow */
    MonRec *logs = NULL;
    long nlogs = 0;
    if (prepare_call(o, c, &a, r) < 0 || engine_reserve(o, &a, r) < 0) err = 1;
    else if (next_step(o, &a, &ns) < 0) err = 2;
    else if (engine_dispatch_core(o, &a, r) < 0) err = 1;
    else if (take_monitor_log(o, &logs, &nlogs) < 0) err = 1;
    engine_unlock(o);
    if (err == 2) {
        derr("the step counter would pass 2**62: give steps explicitly (step=...) below it");
        return -1;
    }
    if (err) { PyErr_NoMemory(); return -1; }
    int rc = nlogs ? emit_monitor_log(o, logs, nlogs) : 0;
    free(logs);
    return rc;
}

/* dispatch(...): the Plan. hits(...): the same for a caller that needs no Plan when every
 * access hit and the dispatch moved nothing (the offload engine on a pool that holds the
 * model): True then, else the Plan */
static PyObject *call_plan(Engine *o, PyObject *const *args, size_t nargsf, PyObject *kwnames, const char *fname) {
    CallArgs c;
    Rec r;
    memset(&r, 0, sizeof r);
    PyObject *res = NULL;
    if (run_call(o, args, nargsf, kwnames, fname, &c, &r) == 0) {
        int all = fname[0] == 'h' && r.nloads == 0 && r.nev == 0;
        for (long i = 0; all && i < r.n; i++) all = r.hit[i] != 0;
        res = all ? Py_NewRef(Py_True) : engine_plan_of(o, &r, c.layer_o, r.n == c.n ? c.experts_o : NULL);
    }
    call_free(&c);
    rec_free(&r);
    return res;
}

static PyObject *engine_dispatch(Engine *o, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    return call_plan(o, args, nargsf, kwnames, "dispatch");
}

static PyObject *engine_hits(Engine *o, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    return call_plan(o, args, nargsf, kwnames, "hits");
}

/* add_stall(ms): a measured (or simulated) stall, a finite number >= 0 */
static PyObject *engine_add_stall(Engine *o, PyObject *v) {
    double ms = -1.0;
    if (!PyBool_Check(v) && (PyFloat_Check(v) || PyLong_Check(v) || PyNumber_Check(v))) {
        ms = PyFloat_AsDouble(v);
        if (ms == -1.0 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_TypeError) && !PyErr_ExceptionMatches(PyExc_ValueError) &&
                    !PyErr_ExceptionMatches(PyExc_OverflowError)) return NULL;
            PyErr_Clear();
            ms = -1.0;
        }
    }
    if (!(ms >= 0.0) || !isfinite(ms))
        return derr("a stall must be a finite number of milliseconds >= 0, got %R", v), NULL;
    if (engine_lock(o, "a stall report") < 0) return NULL;
    o->stall += ms;
    engine_unlock(o);
    Py_RETURN_NONE;
}

/* _apply(action): an adapt action applied between dispatches (Runtime.set): the action as
 * compiled.py encodes it, checked there */
static PyObject *engine_apply(Engine *o, PyObject *t) {
    Action a;
    memset(&a, 0, sizeof a);
    if (action_from(&a, t) < 0) return NULL;
    if (action_check(o, &a) < 0 || PyList_Append(o->kept, t) < 0) { free(a.rule); return NULL; }
    Rec r;
    memset(&r, 0, sizeof r);
    if (engine_lock(o, "a change") < 0) { free(a.rule); return NULL; }
    o->stamp++;                  /* nothing is in use between dispatches */
    if (o->tiers) tier_between(o);
    int rc = apply_action(o, &a, &r);
    engine_unlock(o);
    free(a.rule);
    PyObject *res = NULL;
    if (rc == -2) PyErr_SetString(ConfigError, "the compiled engine has no such eviction rule");
    else if (rc < 0 || r.oom) PyErr_NoMemory();
    else {
        /* what it evicted, as (key, slot) pairs */
        res = PyList_New(r.nev);
        for (long j = 0; res && j < r.nev; j++) {
            PyObject *k = engine_key(o, r.ev[j].key);
            PyObject *x = k ? Py_BuildValue("(Ni)", k, r.ev[j].slot) : NULL;
            if (!x) { Py_CLEAR(res); break; }
            PyList_SET_ITEM(res, j, x);
        }
    }
    rec_free(&r);
    return res;
}

static PyObject *engine_setup(PyObject *self, PyObject *args) {
    PyObject *plan, *de, *ce, *be, *logger, *normalize, *step;
    if (!PyArg_ParseTuple(args, "OOOOOOO:setup", &plan, &de, &ce, &be, &logger, &normalize, &step)) return NULL;
    /* a tier step is made as a tuple of its type (a NamedTuple: no fields of its own) */
    if (!PyType_Check(step) || !PyType_IsSubtype((PyTypeObject *)step, &PyTuple_Type) ||
            ((PyTypeObject *)step)->tp_basicsize != PyTuple_Type.tp_basicsize ||
            ((PyTypeObject *)step)->tp_itemsize != PyTuple_Type.tp_itemsize) {
        PyErr_SetString(PyExc_TypeError, "setup: Step must be a NamedTuple class");
        return NULL;
    }
    Py_XSETREF(g_step_type, Py_NewRef(step));
    Py_XSETREF(g_normalize, Py_NewRef(normalize));
    /* the Plan is made by filling its slots (what its __init__ assigns), found here */
    if (!PyType_Check(plan)) { PyErr_SetString(PyExc_TypeError, "setup: Plan must be a class"); return NULL; }
    for (int i = 0; i < PLAN_SLOTS; i++) {
        PyObject *desc = PyObject_GetAttrString(plan, plan_slots[i]);
        if (!desc) return NULL;
        int good = Py_TYPE(desc) == &PyMemberDescr_Type &&
                   ((PyMemberDescrObject *)desc)->d_member->type == T_OBJECT_EX;
        if (good) plan_off[i] = ((PyMemberDescrObject *)desc)->d_member->offset;
        Py_DECREF(desc);
        if (!good) { PyErr_SetString(PyExc_TypeError, "setup: Plan's slots are not what the engine fills"); return NULL; }
    }
    Py_XSETREF(g_plan_type, Py_NewRef(plan));
    Py_XSETREF(DispatchError, Py_NewRef(de));
    Py_XSETREF(ConfigError, Py_NewRef(ce));
    Py_XSETREF(BusyError, Py_NewRef(be));
    Py_XSETREF(g_logger, Py_NewRef(logger));
    Py_RETURN_NONE;
}

PyObject *engine_logger(void) { return g_logger; }

static PyObject *engine_replay_m(Engine *o, PyObject *args) { return engine_replay(o, args); }

static PyMethodDef engine_methods[] = {
    {"dispatch", (PyCFunction)(void (*)(void))engine_dispatch, METH_FASTCALL | METH_KEYWORDS,
     "dispatch(layer, experts, weights=None, tokens=1, *, step=None, predictions=None) -> Plan"},
    {"hits", (PyCFunction)(void (*)(void))engine_hits, METH_FASTCALL | METH_KEYWORDS,
     "hits(...): True when every access hit and nothing moved, else the Plan"},
    {"add_stall", (PyCFunction)engine_add_stall, METH_O, "add_stall(ms)"},
    {"_apply", (PyCFunction)engine_apply, METH_O, "_apply(action): an adapt action between dispatches"},
    {"replay", (PyCFunction)engine_replay_m, METH_VARARGS,
     "replay(packed, timeline, tick, every) -> records played"},
    {"_rank", (PyCFunction)(void (*)(void))engine_rank, METH_FASTCALL,
     "_rank(kind, layer, step, experts, top) -> list: the history (0) or affinity (1) predictor observes a dispatch and ranks the next layer's experts"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject EngineType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mpl.runtime._engine.Engine",
    .tp_basicsize = sizeof(Engine),
    .tp_dealloc = (destructor)engine_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A runtime's whole state in C (mpl/runtime/c/engine.h).",
    .tp_methods = engine_methods,
    .tp_new = engine_new,
};

static PyMethodDef module_functions[] = {
    {"setup", (PyCFunction)engine_setup, METH_VARARGS,
     "setup(Plan, DispatchError, RuntimeConfigError, RuntimeBusyError, logger, normalize, Step)"},
    {NULL, NULL, 0, NULL},
};

int engine_init_module(PyObject *m) {
    static const char *names[6] = {"layer", "experts", "weights", "tokens", "step", "predictions"};
    for (int i = 0; i < 6; i++)
        if (!(s_names[i] = PyUnicode_InternFromString(names[i]))) return -1;
    static const char *kinds[3] = {"demand", "background", "prefetch"};
    for (int i = 0; i < 3; i++)
        if (!(s_kind[i] = PyUnicode_InternFromString(kinds[i]))) return -1;
    if (!(s_cpu_o = PyLong_FromLong(W_CPU)) || !(s_stream_o = PyLong_FromLong(W_STREAM)) ||
            !(s_lower_o = PyLong_FromLong(W_LOWER))) return -1;
    /* the read methods join the type's own (engine_read.c) */
    static PyMethodDef all[64];
    int n = 0;
    for (PyMethodDef *d = engine_methods; d->ml_name; d++) all[n++] = *d;
    for (PyMethodDef *d = engine_read_methods; d->ml_name && n < 63; d++) all[n++] = *d;
    EngineType.tp_methods = all;
    EngineType.tp_getset = engine_getset;
    if (PyType_Ready(&EngineType) < 0) return -1;
    Py_INCREF(&EngineType);
    if (PyModule_AddObject(m, "Engine", (PyObject *)&EngineType) < 0) { Py_DECREF(&EngineType); return -1; }
    if (PyModule_AddFunctions(m, module_functions) < 0) return -1;
    if (PyModule_AddIntConstant(m, "MAX_KEYS", ENGINE_MAX_KEYS) < 0) return -1;
    return 0;
}
