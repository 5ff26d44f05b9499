/* lfu and score (mpl/runtime/eviction_basic.py, classes LFU and Score): the residents in an
 * indexed binary heap on (value, tick), tick being the key's last access (unique per key, so
 * the order is total). The victim is the least resident not excluded, found best-first (the
 * Python classes pop the keys in use aside instead; both give the least (value, tick) among
 * the keys not excluded).
 *
 * lfu: +1 per access, a new key starts at 1, every decay_interval accesses (hits and misses)
 * every frequency is multiplied by frequency_decay. The decay is a global rescaling applied
 * lazily: the stored value is f / scale and an access adds inc = 1 / scale; when inc passes
 * 1e150 the stored values are renormalised (LFU._renormalise: each multiplied by 1 / inc,
 * inc back to 1, the heap rebuilt, since rounding can make values equal).
 * score: s = a*w + (1-a)*s on a hit, a new key starts at its weight.
 *
 * The operations the dispatch runs per access are static inline here, so that the engine's
 * dispatch (engine.c) calls them directly, inlined, when it knows the cache's rule; the .c
 * file puts them in the ops table for every other caller. */
#ifndef MPL_STORE_HEAP_H
#define MPL_STORE_HEAP_H

#include "store_impl.h"

typedef struct {
    Store base;
    IHeap h;
    double *hf;              /* per index: lfu f / scale; score its moving average */
    long long *ht;           /* per index: the tick of its last access */
    long long tick;
    double inc;              /* lfu: 1 / scale */
    long long clock;         /* lfu: accesses since the last decay */
    double decay;            /* lfu: cache.frequency_decay */
    long long interval;      /* lfu: cache.decay_interval */
    double alpha;            /* score: cache.score_ema_alpha */
} HeapStore;

/* (value, tick) without branches on the data: the comparisons of a sift are as good as
 * random to a branch predictor */
#define HS_LESS(o, a, b) (((o)->hf[a] < (o)->hf[b]) | (((o)->hf[a] == (o)->hf[b]) & ((o)->ht[a] < (o)->ht[b])))

IHEAP_DEFINE(hs, HeapStore, HS_LESS)

extern const StoreOps store_lfu_ops, store_score_ops;

/* LFU._clock: one access of the decay clock */
static inline void lfu_clock(HeapStore *o) {
    o->clock++;
    if (o->clock >= o->interval) {
        o->clock = 0;
        o->inc /= o->decay;
        if (o->inc > 1e150) {                 /* LFU._renormalise */
            double f = 1.0 / o->inc;
            o->inc = 1.0;
            for (long j = 0; j < o->h.n; j++) {
                int i = o->h.a[j];
                o->hf[i] = o->hf[i] * f;
            }
            hs_rebuild(o);
        }
    }
}

static inline void lfu_hit(Store *s, int k, double w) {
    (void)w;
    HeapStore *o = (HeapStore *)s;
    int i = k - s->klo;
    o->tick++;
    o->hf[i] = o->hf[i] + o->inc;
    o->ht[i] = o->tick;
    hs_down(o, o->h.pos[i]);                  /* value and tick only grow */
    lfu_clock(o);
}

static inline void lfu_miss(Store *s, int k, double w) {
    (void)k; (void)w;
    lfu_clock((HeapStore *)s);
}

static inline void lfu_insert(Store *s, int k, double w) {
    (void)w;
    HeapStore *o = (HeapStore *)s;
    int i = k - s->klo;
    o->tick++;
    o->hf[i] = o->inc;
    o->ht[i] = o->tick;
    hs_push(o, i);
}

static inline void score_hit(Store *s, int k, double w) {
    HeapStore *o = (HeapStore *)s;
    int i = k - s->klo;
    double a = o->alpha;
    o->tick++;
    o->hf[i] = a * w + (1.0 - a) * o->hf[i];
    o->ht[i] = o->tick;
    hs_up(o, o->h.pos[i]);
    hs_down(o, o->h.pos[i]);
}

static inline void score_insert(Store *s, int k, double w) {
    HeapStore *o = (HeapStore *)s;
    int i = k - s->klo;
    o->tick++;
    o->hf[i] = w;
    o->ht[i] = o->tick;
    hs_push(o, i);
}

static inline int hs_evict(Store *s, const Exclude *x, int incoming) {
    (void)incoming;
    HeapStore *o = (HeapStore *)s;
    long p = hs_first_free(o, x);
    if (p < 0) return -1;
    int i = o->h.a[p];
    hs_remove_at(o, p);
    return s->klo + i;
}

#endif
