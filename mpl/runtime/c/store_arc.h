/* arc: the Adaptive Replacement Cache (Megiddo & Modha, FAST 2003, Fig. 4) as
 * mpl/runtime/eviction_published.py's class ARC adapts it: T1/T2 the resident recency and
 * frequency lists, B1/B2 their ghosts, p the adaptive target size of T1. REPLACE skips the
 * keys excluded (the next key of the chosen list, then the other list); a key discarded from
 * outside leaves no ghost.
 *
 * The operations the dispatch runs per access are static inline here, so that the engine's
 * dispatch (engine.c) calls them directly, inlined, when it knows the cache's rule; the .c
 * file puts them in the ops table for every other caller. */
#ifndef MPL_STORE_ARC_H
#define MPL_STORE_ARC_H

#include "store_impl.h"

enum { T1 = 0, T2 = 1, B1 = 2, B2 = 3 };

typedef struct {
    Store base;
    Lists q;                 /* T1, T2, B1, B2: each least recent first */
    double p;
} ARCStore;

extern const StoreOps store_arc_ops;

/* the list key k is in (-1: none, or a key outside this store's range) */
static inline int arc_list(const ARCStore *o, int k) {
    if (k < o->base.klo || k >= o->base.khi) return -1;
    return o->q.lid[k - o->base.klo];
}

static inline void arc_hit(Store *s, int k, double w) {             /* case I */
    (void)w;
    l_move_to_tail(&((ARCStore *)s)->q, T2, k - s->klo);
}

/* cases II-IV, before the admission: adapt p on a ghost hit, or trim the ghosts */
static inline void arc_miss(Store *s, int k, double w) {
    (void)w;
    ARCStore *o = (ARCStore *)s;
    Lists *q = &o->q;
    long c = s->cap;
    long b1 = q->len[B1], b2 = q->len[B2];
    int l = arc_list(o, k);
    if (l == B1) {
        double d = b1 >= b2 ? 1.0 : (double)b2 / (double)b1;
        double x = o->p + d;
        o->p = x < (double)c ? x : (double)c;            /* min(float(c), p + d) */
    } else if (l == B2) {
        double d = b2 >= b1 ? 1.0 : (double)b1 / (double)b2;
        double x = o->p - d;
        o->p = x > 0.0 ? x : 0.0;                        /* max(0.0, p - d) */
    } else {
        long t1 = q->len[T1], t2 = q->len[T2];
        long l1 = t1 + b1;
        if (l1 >= c) {
            if (t1 < c && b1) l_remove(q, q->head[B1]);
        } else if (l1 + t2 + b2 >= c && (int64_t)l1 + t2 + b2 >= 2 * (int64_t)c && b2) {
            l_remove(q, q->head[B2]);
        }
    }
}

static inline int arc_evict(Store *s, const Exclude *x, int incoming) {
    ARCStore *o = (ARCStore *)s;
    Lists *q = &o->q;
    int li = arc_list(o, incoming);
    int in_b1 = incoming >= 0 && li == B1, in_b2 = incoming >= 0 && li == B2;
    if (incoming >= 0 && !in_b1 && !in_b2 && q->len[T1] >= s->cap) {
        /* case IV(A), |T1| = c: T1's least recent key leaves without a ghost entry */
        int v = l_first_free(q, T1, x, s->klo);
        if (v >= 0) {
            l_remove(q, v);
            return s->klo + v;
        }
    }
    /* REPLACE */
    long n1 = q->len[T1];
    int first = n1 && ((double)n1 > o->p || (in_b2 && (double)n1 == o->p)) ? 0 : 1;
    for (int j = 0; j < 2; j++) {
        int t = j == 0 ? first : 1 - first;        /* T1 or T2; its ghost list is t + 2 */
        int v = l_first_free(q, t, x, s->klo);
        if (v >= 0) {
            l_remove(q, v);
            l_push(q, t + 2, v);
            return s->klo + v;
        }
    }
    return -1;
}

static inline void arc_insert(Store *s, int k, double w) {
    (void)w;
    ARCStore *o = (ARCStore *)s;
    int i = k - s->klo, l = o->q.lid[i];
    if (l == B1 || l == B2) l_move_to_tail(&o->q, T2, i);
    else l_push(&o->q, T1, i);
}

#endif
