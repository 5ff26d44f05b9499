/* Memory tiers in the compiled engine (SPEC §12): the compiled twin of mpl/runtime/tiers.py
 * (TieredRuntime), for sets of tiers that cache whole experts or, with granularity_split = N,
 * each expert as N parts (every part a key of its own: engine.h), at one precision per tier
 * or with a dtype_ladder (ladder.py's LadderCache: Tier.nrung; a top
 * tier's keys are the engine's, their rungs the tier's), every tier's eviction one of the engine's stores or a
 * weighted_sum of them (store_weighted.c; mpl/runtime/compiled.py says which policies it holds).
 *
 * As in the pure runtime, the top tier of each set of tiers is the engine's device cache of
 * that set (Engine.C[i], its keys' slots in Engine.slot, the one slot pool): hits, prefetch
 * proposals, triggers, the monitor and adapt rules work on it as on any cache; the tiers
 * below it are caches of their own (a store, a key -> slot map, a free list), which the miss
 * path (tier_miss), a key leaving the device (tier_gone: demoted) and the prefetch issue
 * (tier_issue) consult. Every move between tiers is a PlanStep in the record.
 */
#ifndef MPL_TIERS_H
#define MPL_TIERS_H

#include "engine.h"

enum { TK_GPU = 0, TK_CPU = 1, TK_DISK = 2 };
/* the (precision, split) pairs a link can see: four precisions, a split per set (at most 64
 * distinct: the engine's S) */
#define TIER_LINKS 256

typedef struct {
    int kind, bits, exact, always, requant;   /* requant: on demote(this -> next) in place */
    int dtype;                 /* index into Tiers.dtypes (-1: None, the checkpoint's own) */
    double unit_bytes;
    double promote;            /* promote(next -> this)'s trigger_threshold; NaN: none */
    long slots;                /* -1: the last tier (it holds every expert) */
    PyObject *name, *location; /* borrowed from the configuration */
    /* a cache tier other than a set's top gpu tier (that one is the engine's cache) */
    Store *st;
    long nres, ftop, pool;
    int *slot;                 /* key - Level.klo -> slot, -1 */
    int *fstack;               /* its free slots (SlotFreeList: the last is taken next) */
    /* a dtype_ladder (nrung > 1): LadderCache of ladder.py, each key at a rung within a size;
     * a unit at rung r costs rbits[r] bit-units */
    int nrung;
    int rbits[8], rdtype[8], rexact[8];
    double rbytes[8];
    int64_t budget, used;      /* bit-units (LadderCache.budget, .used) */
    signed char *rung;         /* key - Level.klo -> its rung, -1: not resident */
    int *kbuf;                 /* the store's keys() (the cold-end walk, its kept size) */
    int *also_k, *also_s;      /* the last admission's victims after the first, their slots */
    long nalso;
    int64_t at[8], nat[8];     /* accesses served at each rung; residents at each rung */
    int64_t requants;
    /* what it did (stats()["tiers"]) */
    int64_t hits, approximate, promotions, demotions, evictions, reads;
    double bytes_read;
} Tier;

typedef struct {
    int n, gpu, disk, read_into, last, thresholds;
    int split;                 /* granularity_split: the parts an expert is cached as */
    int klo, khi;              /* the keys of its layers: [klo, khi) */
    long *layers, nlayers;
    PyObject *label;           /* borrowed */
    Tier *t;
} Level;

struct Tiers {
    long nlv;
    Level *lv;
    int *level_of;             /* per layer its set (the engine's lcache) */
    int stored_bits;
    long window;               /* cache.freq_window: the promotion thresholds' window */
    PyObject *dtypes;          /* borrowed tuple of str */
    int ndtypes;
    /* the thresholds' windows, per layer: a ring of its last accesses; per key its count */
    int **wq;
    long *wcap, *whead, *wlen;
    int *wcnt;
    int64_t *fetched, fstamp;  /* keys read from the disk in this dispatch: fetched == fstamp */
    int64_t *pmark, pstamp;    /* a prefetch round's protected keys: pmark == pstamp */
    int vac_lv, vac_t, vac_k;  /* a promotion's source (set, tier, key); vac_k -1: none */
    int nlink;                 /* units over the host link, per (precision, split), first seen first */
    int link_bits[TIER_LINKS], link_split[TIER_LINKS];
    int64_t link_n[TIER_LINKS];
    int64_t approx;            /* accesses computed from a copy below the checkpoint's precision */
    int64_t *approx_at;        /* ... per dtype; seen: the dtype has an entry */
    unsigned char *approx_seen;
};

/* built from the configuration's "tiers" (tiers.c; the caches C[] included): 0, -1 with an
 * exception */
int tiers_build(Engine *o, PyObject *cfg);
void tiers_free(Engine *o);
/* room for a dispatch of n accesses of layer (its window, its lower tiers' stores): 0, -1 */
int tiers_reserve(Engine *o, long layer, long n);
/* a dispatch of layer starts (_tier_begin): its window, its lower tiers' clocks */
void tier_begin(Engine *o, long layer, const long *ex, long n);
/* the accesses of a dispatch (a tiered dispatch's loop): counts into o, cnt[4] its hits */
void tier_accesses(Engine *o, const Args *a, Rec *r, const int *ord, const double *wv, int64_t *cnt);
/* a key left the device (any reason): counted, demoted below */
void tier_gone(Engine *o, int k, Rec *r);
/* prefetch proposals o->props[0..np) into the top tiers (Runtime._issue of tiers.py) */
void tier_issue(Engine *o, long np, long layer, const long *ex, long n, Rec *r);
/* the device bytes the top tiers hold (_used_bytes) */
double tier_used_bytes(const Engine *o);
/* between dispatches (set()): nothing in use, nothing read in a dispatch */
void tier_between(Engine *o);
/* stats()'s tier part: a snapshot under the lock, then added to the stats dict */
typedef struct TierSnap TierSnap;
TierSnap *tier_snap(const Engine *o);
int tier_stats(Engine *o, TierSnap *s, const int64_t *l_hit, PyObject *out);   /* frees s */
void tier_snap_free(TierSnap *s);
/* a Plan's steps (after the lock is released); step_type: mpl.runtime.plan.Step */
PyObject *tier_steps_list(Engine *o, const Rec *r, PyObject *step_type, PyObject *const *kinds);

#endif
