/* The eviction stores of the compiled engine: one ops table per rule.
 *
 * A store orders the resident keys of one cache and chooses its victims; it holds no slots
 * and moves no data (the engine does). It is the compiled twin of a Python store class of
 * mpl/runtime/eviction_*.py and follows that class call for call: the same victims, the
 * same order of keys, the same floating-point operations in the same order. Its state is its
 * own (nothing of it lives in the engine), allocated when it is made and sized by the key
 * range it serves, so that no operation but `prepare` ever allocates.
 *
 * Keys are ints: layer * E + expert, in the engine's key space [0, L * E). A store serves the
 * keys [klo, khi): a per-layer cache's store those of its layer, the shared cache's store
 * all of them. Pinned keys never enter a store.
 *
 * Python's protocol (mpl/runtime/eviction_basic.py, class Store) and the ops below:
 *   hit(key, w)        -> hit        an access of a resident key (w: its router weight)
 *   miss(key, w)       -> miss       an access of a key not resident, before any admission
 *                                    decision; only called when ST_NEEDS_MISS is in s->flags
 *   admits(key)        -> admits     the admission filter; only called when ST_FILTERS is in
 *                                    s->flags
 *   evict(excl, inc)   -> evict      remove and return a victim among the keys not excluded
 *                                    (-1: every key is excluded); `incoming` is the key being
 *                                    admitted (-1: None, as for a trigger's victims)
 *   insert(key, w)     -> insert     a new resident key (a load, a prefetch arrival, a key
 *                                    migrated from another store with w = 0.0)
 *   discard(key)       -> discard    forget a resident key removed from outside (TTL, flush)
 *   keys()             -> keys       the resident keys coldest first (what an eviction switch
 *                                    migrates, in that order)
 *   len()              -> len
 *   resize(capacity)   -> resize     the cache's capacity changed (segment sizes follow)
 *   set_param(k, v)    -> set_param  an adaptable cache parameter changed (SP_* codes)
 *   begin(step, layer) -> begin      a dispatch starts; only called when ST_CLOCKED is in s->flags
 * and one the compiled store needs because it never allocates elsewhere:
 *   prepare(layer, n)                room for n more accesses of `layer` (frequency windows)
 *                                    before any of them happens: 0, or -1 when memory ran out
 *                                    (then nothing changed). NULL when a rule needs none.
 * miss, admits and begin are NULL where the flag that calls them is not set; every other op
 * but prepare is never NULL. No op runs Python code or sets a Python exception.
 *
 * What a caller guarantees (the engine, and _engine._store_run, which checks each point):
 * hit(k) only for a resident k, insert(k) only for a k not resident, miss(k) for a k not
 * resident; every k in [klo, khi); discard(k) may name any k of the range (a no-op unless it
 * is resident); `incoming` is -1 or any key; weights are finite; a step is any int64 and a
 * layer is in [0, L); capacities are in [0, INT_MAX]; set_param's and store_make's values are
 * those store_param_error accepts.
 *
 * Exclusion: the engine marks the keys in use by the current dispatch (and, during a
 * prefetch round, the round's proposals) with mark[key] == stamp; a segmented pair's
 * demotion excludes only the key it protects (mark NULL, only = that key or -1).
 */
#ifndef MPL_STORE_H
#define MPL_STORE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const int64_t *mark;   /* indexed by key (the engine's whole key space); NULL: see only */
    int64_t stamp;
    int only;              /* with mark == NULL: the one excluded key, -1 for none */
} Exclude;

static inline int ex_has(const Exclude *x, int k) {
    return x->mark ? x->mark[k] == x->stamp : k == x->only;
}

/* The adaptable cache parameters a store reads, as the runtime holds them (a count such as
 * decay_interval or freq_window as a double holding an integer; crf_half_life in steps). */
enum {
    SP_FREQUENCY_DECAY = 0,   /* cache.frequency_decay */
    SP_DECAY_INTERVAL,        /* cache.decay_interval */
    SP_FREQ_THRESHOLD,        /* cache.freq_threshold */
    SP_FREQ_WINDOW,           /* cache.freq_window */
    SP_SCORE_EMA_ALPHA,       /* cache.score_ema_alpha */
    SP_CRF_HALF_LIFE,         /* cache.crf_half_life */
    SP_COUNT
};

#define ST_NEEDS_MISS 1u      /* Store.needs_miss */
#define ST_FILTERS    2u      /* Store.filters */
#define ST_CLOCKED    4u      /* Store.clocked */
#define ST_SIDE       8u      /* may be a side of a segmented pair "a | b" (SEGMENT_RULES) */
#define ST_LAYERED   16u      /* reads layer and expert ids, not only keys (frequency windows per
                               * layer, the layer a pass is at) */

typedef struct Store Store;

typedef struct StoreOps {
    const char *name;         /* the rule as the IR spells it ("lru", ...) */
    unsigned flags;
    size_t size;              /* sizeof the rule's struct, which starts with a Store */
    /* the rule's own fields, after store_make set the Store's; params: SP_COUNT values.
     * 0, or -1 when memory ran out (fini is then still called) */
    int (*init)(Store *s, const double *params);
    void (*fini)(Store *s);   /* frees what init and prepare allocated (never the struct) */
    void (*begin)(Store *s, int64_t step, long layer);
    int (*prepare)(Store *s, long layer, long n);
    void (*hit)(Store *s, int k, double w);
    void (*miss)(Store *s, int k, double w);
    int (*admits)(const Store *s, int k);
    int (*evict)(Store *s, const Exclude *x, int incoming);
    void (*insert)(Store *s, int k, double w);
    void (*discard)(Store *s, int k);
    long (*len)(const Store *s);
    long (*keys)(const Store *s, int *out);   /* writes len() keys, coldest first; returns len() */
    void (*resize)(Store *s, long cap);
    void (*set_param)(Store *s, int param, double v);
} StoreOps;

struct Store {
    const StoreOps *ops;
    unsigned flags;           /* ops->flags for a single rule; a segmented pair's from its
                               * sides (needs_miss and filters are side a's, clocked either's) */
    long cap;                 /* the cache's capacity (resize keeps it) */
    int klo, khi;             /* the keys it may hold: [klo, khi) */
    long L, E;                /* the model's layers and keys per layer */
    long P;                   /* keys per expert (the parts of granularity_split, else 1): key k
                               * is part k % P of expert k / P of layer k / E */
};

/* The rules, by name, in one table (stores.c): every rule of the Python registry
 * (mpl.runtime.eviction.RULES). */
int store_rule_count(void);
const StoreOps *store_rule_at(int i);
const StoreOps *store_rule(const char *name);          /* NULL: no such rule */

/* NULL when v is a value the stores take for parameter `param` (an SP_* code): the schema's
 * range of that parameter (counts whole numbers); else why not, as a static string. */
const char *store_param_error(int param, double v);

/* A store for a rule as the IR spells it ("lfu", or a segmented pair "lfu|lru" / "lfu | lru").
 * Returns 0 and *out, or: -1 out of memory, -2 unknown rule, -3 a side that cannot be one of a
 * segmented pair, -4 a bad argument (a capacity outside [0, INT_MAX], a key range that is not
 * a non-empty part of [0, L * E), L * E beyond INT_MAX, P < 1 or not a divisor of E, a
 * parameter store_param_error refuses). E: keys per layer; P: keys per expert (Store.P).
 * Nothing Python is touched (no exception is set). */
int store_make(Store **out, const char *rule, long cap, int klo, int khi, long L, long E, long P,
               const double *params);
/* A memory tier's weighted_sum(rule = weight, ...) over n single-queue rules (ST_SIDE), each
 * weight finite and > 0: as store_make (-3 a rule that is not single-queue, -4 also n outside
 * [2, 8] or a bad weight). */
int store_make_weighted(Store **out, const char *const *rules, const double *weights, int n,
                        long cap, int klo, int khi, long L, long E, long P, const double *params);
void store_free(Store *s);

#endif
