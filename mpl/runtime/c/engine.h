/* The compiled engine: a runtime's whole state in C, for its whole life (mpl.runtime._engine.Engine).
 *
 * One Engine is one runtime of one policy for one model shape. Python builds it once from a
 * configuration (mpl/runtime/compiled.py: the policy's values, its features, its adapt rules,
 * the slot layout) and never hands state in or out afterwards: dispatches, replays, adapt
 * actions, triggers and rebalancing run here; reads are getters that copy what they return.
 *
 * Units: engine.c (the type, construction, argument conversion, the dispatch and the Plan),
 * engine_prefetch.c (history, affinity, learned and lookahead proposals; prefetch issue),
 * engine_layers.c (slots, triggers, capacity changes, the per-layer signal and rebalancing),
 * engine_monitor.c (the monitor window, adapt rules and actions, the logs),
 * engine_replay.c (a packed trace through the same dispatch and the C timeline),
 * engine_read.c (the getters).
 *
 * Threads and callbacks (SPEC §5): every entry point holds the engine's lock, and no Python
 * code runs while it is held: arguments are converted before it is taken, the Plan and every
 * Python object a read returns are built after the state is read into C memory, log records
 * are emitted after the lock is released. So a callback (a logging handler, a finalizer, a
 * tick) always finds the state whole, and no lock of one runtime is held while code that
 * could take another's runs.
 */
#ifndef MPL_ENGINE_H
#define MPL_ENGINE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>
#include <stdint.h>

#include "learned.h"
#include "plan.h"
#include "ring.h"
#include "store.h"

/* the targets an affinity row keeps in order (a prediction of at most this many reads only
 * them: mpl/runtime/c/engine_prefetch.c, affinity_top) */
#define AFF_KEEP 8

/* The largest numbers the engine counts to: steps (a caller may give them) stay within
 * 2^62, token counts within 2^53 (exact as doubles: the hybrid schedule compares them with a
 * float limit); both backends refuse more with a DispatchError. */
#define STEP_MAX (1LL << 62)
#define TOKENS_MAX (1LL << 53)
/* the largest key space (layers x experts) the engine holds in tables */
#define ENGINE_MAX_KEYS (1L << 22)
/* the largest count the engine takes from its configuration or an adapt action (a budget, a
 * window, an interval; a capacity stops at INT_MAX: mpl.runtime.core.CAPACITY_SLOTS_MAX); the
 * schema's counts are far below, and sums and products of a few stay far from overflow */
#define ENGINE_COUNT_MAX (1LL << 40)

enum { MODE_GPU = 0, MODE_CPU = 1, MODE_HYBRID = 2 };
enum { STRAT_NONE = 0, STRAT_HISTORY, STRAT_AFFINITY, STRAT_LOOKAHEAD, STRAT_LEARNED };
enum { ALLOC_UNIFORM = 0, ALLOC_ENTROPY, ALLOC_FREQUENCY };
/* metric codes (mpl.runtime.monitor.METRIC_NAMES order) */
enum { M_HIT = 0, M_MISS, M_EVICT, M_PFACC, M_XFER, M_STALL, M_COUNT };
enum { C_LT = 0, C_LE, C_GT, C_GE, C_EQ, C_NE };
enum { U_ACC = 0, U_STEPS, U_TOKENS };

/* adapt actions: what a rule's `set` can change (mpl.runtime.adapt.ACTIONS) */
enum {
    A_CAPACITY = 0, A_EVICTION, A_STORE_PARAM, A_MEM_THRESHOLD, A_MEM_HEADROOM, A_MEM_BUDGET,
    A_TTL, A_STRATEGY, A_BUDGET, A_LOOKAHEAD, A_AFF_THRESHOLD, A_HIST_WINDOW, A_CONFIDENCE,
    A_MODE, A_OFFLOAD, A_PRIORITY, A_MON_WINDOW, A_LOG_INTERVAL, A_ALLOCATION, A_TOTAL_BUDGET,
    A_MIN_CAP, A_MAX_CAP, A_REBALANCE_INTERVAL, A_ENTROPY_WINDOW,
    A_TRIGGER_PRESSURE, A_TRIGGER_TTL, A_TRIGGER_FLUSH, A_REBALANCE,
    A_COUNT
};

typedef struct {
    int code;              /* A_* */
    int param;             /* A_STORE_PARAM: its SP_* code */
    long long i;           /* an integer value (slots, counts, codes, bools; ttl: n, -1 None) */
    double d;              /* a real value (NaN: None) */
    double d2;             /* A_OFFLOAD: the hybrid token limit it gives */
    int flag;              /* A_TTL: counted in steps */
    char *rule;            /* A_EVICTION: the rule as the IR spells it (owned) */
    int kidx;              /* the adaptable parameter's index in the config's plain_keys (-1: a
                            * trigger) */
    PyObject *key;         /* the key the log names (borrowed from the config) */
    PyObject *plain;       /* the value the log shows (borrowed from the config) */
} Action;

typedef struct {
    int metric, cmp, unit, rearm, index, line;
    double value;
    long long n;
    int nact;
    Action *act;
    int inverse;           /* the rule it restores (-1: none) */
    int partner;           /* its restoring half (-1: none) */
    /* state (mpl.runtime.core._Rule) */
    int armed;
    long long held;
    long long mark;        /* -1: None */
} Rule;

typedef struct {
    long long acc_index;   /* the access index the record is attributed to */
    long long ev, ld, pfl, pfu;
    double stall;
} MEvent;

/* an adapt log entry, its Python dict built when read */
typedef struct {
    long long step, access;
    int rule, line;
    PyObject *key, *old, *new_;     /* borrowed (kept alive by the engine's config) */
    long long old_int;              /* old is this int when old == NULL (a capacity in slots) */
} AdaptEntry;

/* a monitor log record: per logged metric its value (NaN with none[i]: None) */
typedef struct {
    long long access, step;
    double v[M_COUNT];
    unsigned char none[M_COUNT];
} MonRec;

typedef struct {
    Store *st;
    long cap;
    long nres;             /* residents, pinned ones included */
    int fixed;             /* a top tier whose residency is always: never gives a victim */
} Cache;

typedef struct Tiers Tiers;   /* memory tiers (tiers.h) */

/* One dispatch's record (plan.h's PlanRec, growable): the dispatch call's own (converted
 * back into a Plan after the lock is released) or the replay's (reused per record). */
typedef struct {
    int64_t step;
    long layer;
    long n, cn;
    long *experts, *where;
    long *pw, cpw;         /* where == W_PARTS: the access's parts' places at pw[i * S + p] */
    unsigned char *hit;
    PlanLoad *loads;
    long nloads, cloads;
    PlanEvict *ev;
    long nev, cev;
    PlanStep *steps;       /* memory tiers' moves (Plan.steps) */
    long nsteps, csteps;
    int oom;               /* an append found no memory: the record is incomplete */
} Rec;

typedef struct Engine {
    PyObject_HEAD
    PyThread_type_lock lock;
    unsigned long owner;   /* the thread holding the lock, 0 none */
    long replaying;        /* the thread replaying, 0 none */
    int frozen;            /* a replay runs Python code (a tick, a log handler, a Python
                            * timeline): its state is whole and does not change meanwhile, so a
                            * read from any thread is served without the lock */
    const char *broken;    /* why the state is incomplete (an allocation failed mid-call), or NULL */
    PyObject *config;      /* the configuration it was built from (keeps the log's objects alive) */
    PyObject *kept;        /* a list of the actions set() applied (their values stay alive) */
    PyObject **ktup;       /* key -> its (layer, expert) or (layer, expert, part) tuple, made on
                            * first use (NULL until then; owned, shared with the Plans and
                            * getters that show it) */

    /* shape: a key is part p of expert e of layer l, (l * E + e) * S + p, where S is the most
     * parts a set of memory tiers splits an expert into (granularity_split; 1 without) and a
     * set that splits into fewer uses parts [0, its split); U = E * S keys per layer, K =
     * L * U keys in all */
    long L, E, S, U, K, top_k;
    double wdef, expert_bytes;
    unsigned char *pinned; /* per key: 1 for a pinned key */
    int f_pins;

    /* caches and slots */
    int per_layer;
    long ncaches;
    Cache *C;
    Tiers *tiers;          /* memory tiers (tiers.h; owned), NULL without */
    const int *lcache;     /* with tiers: per layer the index of its cache (its set's top tier) */
    int *slot;             /* key -> slot, -1 not resident */
    int *fstack;           /* the free slots, a stack (SlotFreeList.free: last = next taken) */
    long ftop, pool_size, requested_slots;
    int64_t *mark;         /* key -> stamp of the dispatch (or prefetch round) using it */
    int64_t stamp;
    char *rule;            /* the eviction rule now (owned) */
    double sp[SP_COUNT];   /* the store parameters now */
    long cap_param;        /* cache.capacity now, in slots */
    int f_weighted;        /* a score rule is reachable: stores get the router weights */

    /* schedule */
    int mode;
    double cpu_limit;
    int priority;

    /* prefetch */
    int strategy, f_prefetch, f_history, f_affinity, f_learned, f_lookahead, next_only;
    long budget, lookahead, aff_depth;
    double aff_thr;
    unsigned char *pf;     /* key prefetched and not yet accessed */
    Ring hr;               /* history: the window's rows per layer */
    int *hcnt;             /* L * E counts */
    long *hbk;             /* per layer: the largest count reached */
    int *hdelta, *htouched;
    long long *aff_n, *aff_c;      /* D*L*E row counts, D*L*E*E transition counts */
    unsigned char *aff_tab;        /* D*L: the (d, src) table exists */
    long long *aff_step;           /* per layer the step of its last dispatch */
    unsigned char *aff_has;
    int *aff_last, *aff_lastn;     /* per layer its last dispatch's experts */
    int *aff_top;                  /* D*L*E rows x AFF_KEEP: each row's most frequent targets */
    long long *aff_topc;           /*   (count desc, id asc; -1: none yet) and their counts */
    double *aff_best;
    long long *aff_bc, *aff_bn;    /* per target (bn 0 between predictions) */
    int *aff_cand;
    Learned *lrn;                  /* owned */
    long lrn_window;

    /* triggers */
    int f_ttl, ttl_steps, f_memory;
    long long ttl_n;               /* -1: no sweep */
    int *tprv, *tnxt;              /* TTL order (least recently accessed first) */
    int64_t *tstamp;
    unsigned char *tin;
    int thead, ttail;
    double mem_thr;                /* NaN: off */
    double mem_headroom, mem_budget;

    /* per-layer budgets */
    int allocation, f_signal, f_rebalance, budget_derived;
    long long total_budget, min_cap, max_cap, rb_interval, dispatches;
    Ring sr;                       /* the signal's window */
    long *stotal, *sn;
    int *scnt, *sprev, *snext, *sfirst, *slast;
    double *rb_w;
    long long *rb_caps;

    /* counters */
    int64_t step, last_layer, accesses, evictions, demand, background, pf_loads, pf_useful,
        cpu_computes, streamed;
    double stall;
    int64_t *l_acc, *l_hit;

    /* monitor and adapt */
    int f_monitor, warm_on_eviction, warm;
    long mwin, mlogint;
    unsigned char *ring;
    long long macc, mhits, mskipped;
    MEvent *events;
    long ecap, ehead, elen;
    long long mev, mld, mpfl, mpfu;
    double mstall;
    long long seen[4];
    double seen_stall;
    int nmetrics;                  /* the metrics the log records */
    int metrics[M_COUNT];
    PyObject *metric_names;        /* tuple (borrowed from the config) */
    int nrules;
    Rule *rules;
    AdaptEntry *alog;
    long nalog, calog;
    MonRec *mlog;
    long nmlog, cmlog, mlog_emitted;
    long nplain;
    PyObject **plain_now;          /* per adaptable parameter its value now as the adapt log shows
                                    * it ("old"; borrowed from the config) */
    int kidx_capacity, kidx_allocation;

    /* scratch (sized at construction) */
    int *props;
    long cprops;
    int *hsort;
    long chsort;
    long *pcn;
    long cpcn;
    double *wv;
    unsigned char *hv;
    int *ord;
    long *ex;
    int *dpos, *dcnt;              /* distinct ids: per expert its position (-1), counts */
    Rec rrec;                      /* the replay's record */
    /* the current call's predictions (per target layer its ids) */
    long long pr_call, *pr_at;
    long *pr_off, *pr_len;
    long *pr_ids;
    long pr_cap;
    GateArg *gates;
} Engine;

/* one dispatch's arguments, converted (engine.c) */
typedef struct {
    long layer;
    long n;
    long *ex;              /* n distinct ids (router order, first occurrence kept) */
    double *w;             /* n weights (a repeat's: the mean), or NULL */
    long long tokens;
    long long step;        /* -1: None */
    int given;             /* predictions were given (copied into the engine's pr_*) */
} Args;

/* engine.c */
/* room for need items in *p (capacity *cap, doubled from 16 as needed): 0, -1 out of memory
 * (nothing changed); inline: a dispatch's record grows through it per load */
static inline int grow(void **p, long *cap, long need, size_t item) {
    if (need <= *cap) return 0;
    long nc = *cap ? *cap : 16;
    while (nc < need) {
        if (nc > LONG_MAX / 2) return -1;
        nc *= 2;
    }
    if ((size_t)nc > SIZE_MAX / item) return -1;
    void *q = realloc(*p, (size_t)nc * item);
    if (!q) return -1;
    *p = q;
    *cap = nc;
    return 0;
}

/* the record's growth (out of line): room for n accesses, n loads and n evictions (0, -1);
 * one more load / eviction (0, -1 with r->oom set) */
int rec_room(Rec *r, long n);
int rec_grow_loads(Rec *r);
int rec_grow_ev(Rec *r);

/* room for n accesses, and for the n loads and n evictions at most that the accesses
 * themselves record; the record emptied: 0, -1 */
static inline int rec_size(Rec *r, long n) {
    if ((n > r->cn || n > r->cloads || n > r->cev) && rec_room(r, n) < 0) return -1;
    r->n = n;
    r->nloads = r->nev = r->nsteps = 0;
    r->oom = 0;
    return 0;
}

static inline int rec_load(Rec *r, int key, int slot, int victim, int kind) {
    if (r->nloads >= r->cloads && rec_grow_loads(r) < 0) return -1;
    PlanLoad *x = &r->loads[r->nloads++];
    x->key = key; x->slot = slot; x->victim = victim; x->kind = kind;
    return 0;
}

static inline int rec_evict(Rec *r, int key, int slot) {
    if (r->nev >= r->cev && rec_grow_ev(r) < 0) return -1;
    r->ev[r->nev].key = key;
    r->ev[r->nev].slot = slot;
    r->nev++;
    return 0;
}
/* one more tier step (0, -1 with r->oom set) */
int rec_step(Rec *r, int op, int key, int source, int target, int slot, int victim, int dtype, int kind);
int engine_dispatch_core(Engine *o, const Args *a, Rec *r);   /* 0, -1 (broken set) */
/* room for what this dispatch may add to the engine's growable tables (before any state
 * changes): 0, -1 out of memory. Inline: a dispatch with no store window, ring, monitor or
 * prefetch round to grow (the plain rules) costs two tests. */
int engine_reserve_tables(Engine *o, const Args *a);
static inline Cache *layer_cache(const Engine *o, long layer) {
    return o->lcache ? &o->C[o->lcache[layer]] : o->per_layer ? &o->C[layer] : &o->C[0];
}
static inline int engine_reserve(Engine *o, const Args *a, Rec *r) {
    const Cache *c = layer_cache(o, a->layer);
    if (!c->st->ops->prepare && !(o->f_history | o->f_signal | o->f_monitor | o->f_prefetch) && !o->tiers)
        return 0;
    if (o->S > 1 && grow((void **)&r->pw, &r->cpw, a->n * o->S, sizeof(long)) < 0) return -1;
    return engine_reserve_tables(o, a);
}
PyObject *engine_plan_of(Engine *o, const Rec *r, PyObject *layer_o, PyObject *experts_o);
/* the key of expert e of layer (its first part) */
static inline int key_of(const Engine *o, long layer, long e) { return (int)((layer * o->E + e) * o->S); }
/* key k's (layer, expert) tuple, or (layer, expert, part) in a set of tiers that splits
 * experts, a new reference (NULL with an exception) */
PyObject *engine_key(Engine *o, long k);
void engine_broken(Engine *o, const char *why);

/* engine_layers.c */
static inline Cache *cache_of(Engine *o, int k) { return layer_cache(o, k / o->U); }
void gone_state(Engine *o, int k);
void drop_key(Engine *o, Cache *c, int k, Rec *r);
void ttl_touch(Engine *o, int k);
void ttl_unlink(Engine *o, int k);
static inline int64_t ttl_stamp(const Engine *o) { return o->ttl_steps ? o->step : o->accesses; }
void ttl_sweep(Engine *o, Rec *r);
void mem_pressure(Engine *o, Rec *r, int force);
void set_capacity(Engine *o, Cache *c, long cap, Rec *r);
void flush_all(Engine *o, Rec *r);
void trim_cache(Engine *o, Cache *c, Rec *r);
void signal_observe(Engine *o, long layer, const long *ex, long n);
int rebalance(Engine *o, Rec *r);                      /* 0, -1 out of memory */
/* the keys of a dispatch (or a prefetch round) marked in use: mark[key] == stamp (every
 * part of its experts) */
static inline void mark_inuse(Engine *o, long layer, const long *ex, long n) {
    int64_t stamp = ++o->stamp, *mark = o->mark + layer * o->U;
    const long S = o->S;
    if (S == 1) {                  /* (every dispatch of a policy without parts) */
        for (long j = 0; j < n; j++) mark[ex[j]] = stamp;
        return;
    }
    for (long j = 0; j < n; j++)
        for (long p = 0; p < S; p++) mark[ex[j] * S + p] = stamp;
}
int switch_eviction(Engine *o, const char *rule);      /* 0, -1 out of memory, -2 bad rule */

/* engine_prefetch.c */
int prefetch_init(Engine *o);   /* the history's ring (the arrays: engine.c's table) */
int prefetch_reserve(Engine *o);
void history_observe(Engine *o, long layer, const long *ex, long n);
void affinity_observe(Engine *o, long layer, const long *ex, long n);
int learned_observe(Engine *o, long layer, const Args *a);
int prefetch(Engine *o, long layer, const long *ex, long n, int given, Rec *r);   /* 0, -1 */

/* engine_monitor.c */
int monitor_init(Engine *o, long window, long log_interval);
int monitor_observe(Engine *o, const unsigned char *hit, long n, long long tokens, Rec *r);
int monitor_reserve(Engine *o, long n);   /* room for a dispatch of n accesses: 0, -1 */
int apply_action(Engine *o, const Action *a, Rec *r);
double metric_value(const Engine *o, int metric, long long n, int *none);
/* the log records not yet emitted, copied out (under the lock; *recs malloc'd, NULL when
 * none): 0, -1 out of memory */
int take_monitor_log(Engine *o, MonRec **recs, long *n);
/* emit them to the runtime's logger (after the lock is released): 0, -1 */
int emit_monitor_log(Engine *o, const MonRec *recs, long n);
/* the runtime's logger takes debug records: 1, 0, -1 with an exception (Python code: no lock held) */
int monitor_logging_on(void);
PyObject *engine_logger(void);

/* engine_replay.c, engine_read.c */
PyObject *engine_replay(Engine *o, PyObject *args);
extern PyMethodDef engine_read_methods[];
extern PyGetSetDef engine_getset[];

/* the lock (engine.c): a change (a dispatch, a replay, set(), add_stall) waits for it, or is
 * refused with RuntimeBusyError from inside a replay's callback on the replaying thread; a
 * read waits for it too, unless the state is frozen (engine_read_lock: 1, no lock to release) */
PyObject *engine_rank(Engine *o, PyObject *const *args, Py_ssize_t nargs);   /* engine_prefetch.c */
int engine_lock(Engine *o, const char *what);   /* 0, -1 with an exception */
int engine_read_lock(Engine *o);                /* 0 locked, 1 frozen (not locked), -1 */
void engine_unlock(Engine *o);
void engine_read_unlock(Engine *o, int how);

extern PyObject *DispatchError, *ConfigError, *BusyError;

#endif
