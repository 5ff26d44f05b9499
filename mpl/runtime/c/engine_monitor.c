/* The engine's monitor and adapt rules: the window of the last monitor.window accesses with
 * its event records (mpl/runtime/monitor.py), the warm-up, the rules' conditions evaluated at
 * every access (the generated _eval_rules, core.Runtime._advance), their firing and actions
 * (core.Runtime._fire, mpl/runtime/adapt.py), the adapt log and the monitor's log records. */
#include "engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int monitor_init(Engine *o, long window, long log_interval) {
    if (window < 1 || log_interval < 1) {
        PyErr_SetString(PyExc_ValueError, "engine configuration: monitor window and log interval must be >= 1");
        return -1;
    }
    o->mwin = window;
    o->mlogint = log_interval;
    o->ring = calloc((size_t)window, 1);
    o->ecap = 16;
    o->events = malloc(sizeof(MEvent) * (size_t)o->ecap);
    if (!o->ring || !o->events) { PyErr_NoMemory(); return -1; }
    return 0;
}

/* twice the room for event records (their order kept) */
static int events_grow(Engine *o) {
    long nc = o->ecap * 2;
    if ((size_t)nc > SIZE_MAX / sizeof(MEvent)) return -1;
    MEvent *ne = malloc(sizeof(MEvent) * (size_t)nc);
    if (!ne) return -1;
    for (long i = 0; i < o->elen; i++) ne[i] = o->events[(o->ehead + i) % o->ecap];
    free(o->events);
    o->events = ne; o->ecap = nc; o->ehead = 0;
    return 0;
}

/* room for a dispatch of n accesses: its event record, its log records (at most one per
 * access), its adapt log entries (a rule fires at most once per access) */
int monitor_reserve(Engine *o, long n) {
    if (o->elen == o->ecap && events_grow(o) < 0) return -1;
    if (grow((void **)&o->mlog, &o->cmlog, o->nmlog + n + 1, sizeof(MonRec)) < 0) return -1;
    long acts = 0;
    for (int i = 0; i < o->nrules; i++) acts += o->rules[i].nact;
    if (acts && grow((void **)&o->alog, &o->calog, o->nalog + (n + 1) * acts, sizeof(AdaptEntry)) < 0) return -1;
    return 0;
}

/* Monitor.expire: the event records that left the window */
static void expire(Engine *o) {
    long long lo = o->macc - o->mwin;
    while (o->elen && o->events[o->ehead].acc_index <= lo) {
        MEvent *x = &o->events[o->ehead];
        o->mev -= x->ev; o->mld -= x->ld; o->mpfl -= x->pfl; o->mpfu -= x->pfu;
        o->mstall -= x->stall;
        o->ehead = (o->ehead + 1) % o->ecap;
        o->elen--;
    }
    if (!o->elen) o->mstall = 0.0;
}

/* Monitor.push_events (room reserved) */
static void push_events(Engine *o, long long ev, long long ld, long long pfl, long long pfu, double st) {
    if (ev || ld || pfl || pfu || st != 0.0) {
        MEvent *x = &o->events[(o->ehead + o->elen) % o->ecap];
        x->acc_index = o->macc; x->ev = ev; x->ld = ld; x->pfl = pfl; x->pfu = pfu; x->stall = st;
        o->elen++;
        o->mev += ev; o->mld += ld; o->mpfl += pfl; o->mpfu += pfu; o->mstall += st;
    }
    expire(o);
}

/* a metric over a window of n accesses (the generated rule expressions, Monitor's values) */
double metric_value(const Engine *o, int metric, long long n, int *none) {
    *none = 0;
    switch (metric) {
    case M_HIT: return n ? (double)o->mhits / (double)n : 0.0;
    case M_MISS: return n ? 1.0 - (double)o->mhits / (double)n : 0.0;
    case M_EVICT: return n ? (double)o->mev / (double)n : 0.0;
    case M_XFER: return n ? (double)o->mld / (double)n : 0.0;
    case M_STALL: return o->mstall;
    default:
        if (o->mpfl > 0) {
            double a = (double)o->mpfu / (double)o->mpfl;
            return a < 1.0 ? a : 1.0;
        }
        *none = 1;
        return 0.0;
    }
}

static inline long long window_n(const Engine *o) { return o->macc < o->mwin ? o->macc : o->mwin; }

static int holds(int cmp, double x, double v) {
    switch (cmp) {
    case C_LT: return x < v;
    case C_LE: return x <= v;
    case C_GT: return x > v;
    case C_GE: return x >= v;
    case C_EQ: return x == v;
    default: return x != v;
    }
}

/* Monitor.set_window: the window resized in place, keeping its most recent accesses (all it
 * knows when it grows) with their events. 0, -1 out of memory (nothing changed). */
static int set_window(Engine *o, long window) {
    long old = o->mwin;
    long long keep = window_n(o);
    if (keep > window) keep = window;
    long long start = o->macc - keep;
    unsigned char *ring = calloc((size_t)window, 1);
    if (!ring) return -1;
    long long hits = 0;
    for (long long j = 0; j < keep; j++) {
        ring[j] = o->ring[(start + j) % old];
        hits += ring[j];
    }
    free(o->ring);
    o->ring = ring;
    o->mwin = window;
    o->mhits = hits;
    o->mskipped += start;
    o->macc = keep;
    for (long i = 0; i < o->elen; i++) o->events[(o->ehead + i) % o->ecap].acc_index -= start;
    expire(o);
    return 0;
}

/* ------------------------------------------------------------------ actions */
static void log_entry(Engine *o, const Rule *r, PyObject *key, PyObject *old, long long old_int,
                      PyObject *new_) {
    if (o->nalog >= o->calog) return;        /* (reserved: cannot happen) */
    AdaptEntry *x = &o->alog[o->nalog++];
    x->step = o->step;
    x->access = o->f_monitor ? o->macc + o->mskipped : o->accesses;
    x->rule = r->index;
    x->line = r->line;
    x->key = key;
    x->old = old;
    x->old_int = old_int;
    x->new_ = new_;
}

static int per_layer_rebalance(Engine *o, Rec *r) {
    return o->per_layer ? rebalance(o, r) : 0;
}

/* One action (mpl/runtime/adapt.py's ACTIONS, the triggers of core.Runtime._fire): 0; -1 out
 * of memory; -2 an eviction rule the engine does not have */
int apply_action(Engine *o, const Action *a, Rec *r) {
    long L = o->L;
    if (a->kidx >= 0) o->plain_now[a->kidx] = a->plain;
    /* a policy with memory tiers has no cache block: a cache parameter is only recorded
     * (TieredRuntime.set_value) */
    if (o->tiers && a->code <= A_TTL) return 0;
    switch (a->code) {
    case A_CAPACITY:
        o->cap_param = (long)a->i;
        if (o->per_layer) {
            if (o->budget_derived) {
                long long t = (long long)L * a->i;
                if (o->requested_slots < t) t = o->requested_slots;
                if ((long long)L * o->min_cap > t) t = (long long)L * o->min_cap;
                o->total_budget = t;
                return rebalance(o, r);
            }
            return 0;
        }
        set_capacity(o, &o->C[0], (long)(a->i < o->requested_slots ? a->i : o->requested_slots), r);
        return 0;
    case A_EVICTION:
        return switch_eviction(o, a->rule);
    case A_STORE_PARAM:
        o->sp[a->param] = a->d;
        for (long i = 0; i < o->ncaches; i++) o->C[i].st->ops->set_param(o->C[i].st, a->param, a->d);
        return 0;
    case A_MEM_THRESHOLD: o->mem_thr = a->d; return 0;
    case A_MEM_HEADROOM: o->mem_headroom = a->d; return 0;
    case A_MEM_BUDGET: o->mem_budget = a->d * 1e9; return 0;
    case A_TTL: o->ttl_n = a->i; o->ttl_steps = a->flag; return 0;
    case A_STRATEGY: o->strategy = (int)a->i; return 0;
    case A_BUDGET: o->budget = (long)a->i; return 0;
    case A_LOOKAHEAD: o->lookahead = (long)a->i; return 0;
    case A_AFF_THRESHOLD: o->aff_thr = a->d; return 0;
    case A_HIST_WINDOW:
        o->lrn_window = (long)a->i;
        if (o->f_history) o->hr.W = (long)a->i;
        if (o->lrn) lrn_set_window(o->lrn, (long)a->i);
        return 0;
    case A_CONFIDENCE:
        if (o->lrn) lrn_set_confidence(o->lrn, a->d);
        return 0;
    case A_MODE: o->mode = (int)a->i; return 0;
    case A_OFFLOAD: o->cpu_limit = a->d2; return 0;
    case A_PRIORITY: o->priority = (int)a->i; return 0;
    case A_MON_WINDOW: return o->f_monitor ? set_window(o, (long)a->i) : 0;
    case A_LOG_INTERVAL: if (o->f_monitor) o->mlogint = (long)a->i; return 0;
    case A_ALLOCATION:
    case A_REBALANCE:
        if (o->per_layer) o->allocation = (int)a->i;
        return per_layer_rebalance(o, r);
    case A_TOTAL_BUDGET:
        if (!o->per_layer) return 0;
        o->budget_derived = 0;
        o->total_budget = a->i < o->pool_size ? a->i : o->pool_size;
        return rebalance(o, r);
    case A_MIN_CAP:
        if (!o->per_layer) return 0;
        o->min_cap = a->i;
        return rebalance(o, r);
    case A_MAX_CAP:
        if (!o->per_layer) return 0;
        o->max_cap = a->i;
        return rebalance(o, r);
    case A_REBALANCE_INTERVAL: if (o->per_layer) o->rb_interval = a->i; return 0;
    case A_ENTROPY_WINDOW: if (o->per_layer && o->f_signal) o->sr.W = (long)a->i; return 0;
    case A_TRIGGER_PRESSURE: mem_pressure(o, r, 1); return 0;
    case A_TRIGGER_TTL: if (o->f_ttl && o->ttl_n >= 0) ttl_sweep(o, r); return 0;
    case A_TRIGGER_FLUSH: flush_all(o, r); return r->oom ? -1 : 0;
    }
    return 0;
}

/* core.Runtime._fire: the rule's actions in place, each logged; the pair's other half armed */
static int fire(Engine *o, Rule *r, Rec *rec) {
    for (int j = 0; j < r->nact; j++) {
        const Action *a = &r->act[j];
        PyObject *old = NULL;
        long long old_int = 0;
        if (a->code == A_TRIGGER_PRESSURE || a->code == A_TRIGGER_TTL || a->code == A_TRIGGER_FLUSH)
            old = Py_None;
        else if (a->code == A_CAPACITY) old_int = o->cap_param;
        else if (a->code == A_REBALANCE)
            old = o->per_layer ? o->plain_now[o->kidx_allocation] : Py_None;
        else old = o->plain_now[a->kidx];
        int rc = apply_action(o, a, rec);
        if (rc < 0) return rc;
        log_entry(o, r, a->key, old, old_int, a->plain);
    }
    if (r->partner >= 0) o->rules[r->partner].armed = 1;
    if (r->inverse >= 0) o->rules[r->inverse].armed = 1;
    return 0;
}

/* the generated _eval_rules at one access: each rule's condition on the windowed metrics
 * (n: the window's accesses, taken again after a rule fired) */
static int eval_rules(Engine *o, long long tokens, Rec *rec) {
    long long n = window_n(o);
    for (int i = 0; i < o->nrules; i++) {
        Rule *r = &o->rules[i];
        int none;
        double x;
        switch (r->metric) {   /* the generated expressions (n > 0: an access was pushed) */
        case M_HIT: x = (double)o->mhits / (double)n; none = 0; break;
        case M_MISS: x = 1.0 - (double)o->mhits / (double)n; none = 0; break;
        case M_EVICT: x = (double)o->mev / (double)n; none = 0; break;
        case M_XFER: x = (double)o->mld / (double)n; none = 0; break;
        default: x = metric_value(o, r->metric, n, &none); break;
        }
        if (!none && holds(r->cmp, x, r->value)) {
            int due = 0;
            if (r->armed) {                     /* core.Runtime._advance */
                if (r->unit == U_ACC) r->held += 1;
                else if (r->mark != o->step) {
                    if (r->mark != -1) {
                        long long add = r->unit == U_STEPS ? 1 : tokens;
                        r->held = r->held > LLONG_MAX - add ? LLONG_MAX : r->held + add;
                    }
                    r->mark = o->step;
                }
                due = r->held >= r->n;
            }
            if (due) {
                r->armed = 0;
                r->held = 0;
                r->mark = -1;
                int rc = fire(o, r, rec);
                if (rc < 0) return rc;
                n = window_n(o);
            }
        } else {
            r->held = 0;
            r->mark = -1;
            if (r->rearm) r->armed = 1;
        }
    }
    return 0;
}

static void log_record(Engine *o) {
    if (o->nmlog >= o->cmlog) return;        /* (reserved: cannot happen) */
    MonRec *x = &o->mlog[o->nmlog++];
    x->access = o->macc + o->mskipped;
    x->step = o->step;
    long long n = window_n(o);
    for (int i = 0; i < o->nmetrics; i++) {
        int none;
        x->v[i] = metric_value(o, o->metrics[i], n, &none);
        x->none[i] = (unsigned char)none;
    }
}

/* core.Runtime._observe: the dispatch's accesses enter the window, its events are attributed
 * to its last access, the rules are evaluated at each access, a log record every
 * log_interval accesses. Until the warm-up ends (monitor.warmup: the cache has filled once,
 * unless the policy says none) the rules are not evaluated; the dispatch that ends it (by the
 * end of its accesses, prefetches and triggers an eviction happened or every slot of the
 * pool is occupied) clears the window, so the rules judge only what came after the cold
 * start. 0; -1 out of memory; -2 a bad rule */
int monitor_observe(Engine *o, const unsigned char *hit, long n, long long tokens, Rec *rec) {
    long long loads = o->demand + o->background + o->pf_loads;
    long long ev = o->evictions - o->seen[0], ld = loads - o->seen[1];
    long long pfl = o->pf_loads - o->seen[2], pfu = o->pf_useful - o->seen[3];
    double st = o->stall - o->seen_stall;
    for (long j = 0; j < n; j++) {
        long i = (long)(o->macc % o->mwin);
        int v = hit[j];
        o->mhits += v - o->ring[i];
        o->ring[i] = (unsigned char)v;
        o->macc++;
        if (o->elen && o->events[o->ehead].acc_index <= o->macc - o->mwin) expire(o);
        if (j == n - 1) {
            push_events(o, ev, ld, pfl, pfu, st);
            o->seen[0] = o->evictions; o->seen[1] = loads; o->seen[2] = o->pf_loads;
            o->seen[3] = o->pf_useful; o->seen_stall = o->stall;
        }
        if (o->nrules && o->warm) {
            int rc = eval_rules(o, tokens, rec);
            if (rc < 0) return rc;
        }
        if ((o->macc + o->mskipped) % o->mlogint == 0) log_record(o);
    }
    if (!o->warm && (o->evictions || o->ftop == 0)) {   /* the warm-up ends (an eviction, or
                                                         * the pool full): the window afresh */
        o->warm = 1;
        memset(o->ring, 0, (size_t)o->mwin);
        o->mhits = 0;
        o->mskipped += o->macc;
        o->macc = 0;
        o->ehead = o->elen = 0;
        o->mev = o->mld = o->mpfl = o->mpfu = 0;
        o->mstall = 0.0;
    }
    return 0;
}

/* ------------------------------------------------------------------ the log records */
int take_monitor_log(Engine *o, MonRec **recs, long *n) {
    *recs = NULL;
    *n = 0;
    long m = o->nmlog - o->mlog_emitted;
    if (m <= 0) return 0;
    MonRec *c = malloc(sizeof(MonRec) * (size_t)m);
    if (!c) return -1;
    memcpy(c, o->mlog + o->mlog_emitted, sizeof(MonRec) * (size_t)m);
    o->mlog_emitted = o->nmlog;
    *recs = c;
    *n = m;
    return 0;
}

/* {"access": a, "step": s, metric: value, ...} of a record (metric names: the config's) */
PyObject *monitor_record_dict(const Engine *o, const MonRec *x) {
    PyObject *d = Py_BuildValue("{s:L,s:L}", "access", x->access, "step", x->step);
    if (!d) return NULL;
    for (int i = 0; i < o->nmetrics; i++) {
        PyObject *v = x->none[i] ? Py_NewRef(Py_None) : PyFloat_FromDouble(x->v[i]);
        if (!v || PyDict_SetItem(d, PyTuple_GET_ITEM(o->metric_names, i), v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(v);
    }
    return d;
}

/* log.debug("monitor %s", record) for each (as the pure runtime, after the dispatch) */
int monitor_logging_on(void) {
    PyObject *logger = engine_logger();
    if (!logger || logger == Py_None) return 0;
    PyObject *on = PyObject_CallMethod(logger, "isEnabledFor", "i", 10);
    if (!on) return -1;
    int yes = PyObject_IsTrue(on);
    Py_DECREF(on);
    return yes;
}

int emit_monitor_log(Engine *o, const MonRec *recs, long n) {
    int rc = monitor_logging_on();
    if (rc <= 0) return rc;
    /* (read after isEnabledFor, and held: Python code may call setup() meanwhile) */
    PyObject *logger = engine_logger();
    if (!logger || logger == Py_None) return 0;
    Py_INCREF(logger);
    rc = 0;
    for (long i = 0; rc == 0 && i < n; i++) {
        PyObject *d = monitor_record_dict(o, &recs[i]);
        PyObject *r = d ? PyObject_CallMethod(logger, "debug", "sO", "monitor %s", d) : NULL;
        Py_XDECREF(d);
        if (!r) rc = -1;
        Py_XDECREF(r);
    }
    Py_DECREF(logger);
    return rc;
}
