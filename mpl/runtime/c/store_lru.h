/* lru: least recently used (mpl/runtime/eviction_basic.py, class LRU). One list, least
 * recent first; a hit or an insert (a load, a prefetch arrival) puts the key last.
 *
 * The operations are static inline here so that the engine's dispatch (engine.c) calls
 * them directly, inlined, when the cache's rule is lru; store_lru.c puts them in the ops
 * table for every other caller. */
#ifndef MPL_STORE_LRU_H
#define MPL_STORE_LRU_H

#include "store_impl.h"

typedef struct {
    Store base;
    Lists q;                 /* one list: the resident keys, least recent first */
} LRUStore;

extern const StoreOps store_lru_ops;

static inline void lru_hit(Store *s, int k, double w) {
    (void)w;
    l_move_to_tail(&((LRUStore *)s)->q, 0, k - s->klo);
}

static inline void lru_insert(Store *s, int k, double w) {
    (void)w;
    l_push(&((LRUStore *)s)->q, 0, k - s->klo);
}

static inline int lru_evict(Store *s, const Exclude *x, int incoming) {
    (void)incoming;
    LRUStore *o = (LRUStore *)s;
    int i = l_first_free(&o->q, 0, x, s->klo);
    if (i < 0) return -1;
    l_remove(&o->q, i);
    return s->klo + i;
}

#endif
