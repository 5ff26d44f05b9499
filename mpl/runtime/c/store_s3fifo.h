/* s3fifo: S3-FIFO (Yang et al., SOSP 2023, Algorithm 1) as mpl/runtime/eviction_published.py's
 * class S3FIFO adapts it: a small FIFO S (10% of the cache), a main FIFO M, a ghost FIFO G
 * (max(1, int(0.9 * capacity)) entries), 2-bit frequencies capped at 3. One victim per load
 * (moving a key into a full M during evictS evicts from M and ends the eviction); a key
 * excluded is treated as just accessed (moved on from S into M, reinserted in M); a loop over
 * M that meets only such keys gives up after 4 |M| + 1 looks.
 *
 * The operations the dispatch runs per access are static inline here, so that the engine's
 * dispatch (engine.c) calls them directly, inlined, when it knows the cache's rule; the .c
 * file puts them in the ops table for every other caller. */
#ifndef MPL_STORE_S3FIFO_H
#define MPL_STORE_S3FIFO_H

#include "store_impl.h"

enum { SQ = 0, MQ = 1, GQ = 2 };

typedef struct {
    Store base;
    Lists q;                 /* S, M, G: each oldest first */
    unsigned char *freq;     /* per index: its frequency while in S or M */
    double s_limit, m_limit;
    long g_cap;
} S3Store;

extern const StoreOps store_s3fifo_ops;

static inline void s3_hit(Store *s, int k, double w) {
    (void)w;
    S3Store *o = (S3Store *)s;
    unsigned char *f = &o->freq[k - s->klo];
    if (*f < 3) ++*f;
}

static inline void s3_insert(Store *s, int k, double w) {
    (void)w;
    S3Store *o = (S3Store *)s;
    int i = k - s->klo;
    if (o->q.lid[i] == GQ) l_move_to_tail(&o->q, MQ, i);
    else l_push(&o->q, SQ, i);
    o->freq[i] = 0;
}

/* S3FIFO._evict_m: -1 when the budget ran out or M is empty */
static inline int s3_evict_m(S3Store *o, const Exclude *x) {
    Lists *q = &o->q;
    long long budget = 4LL * q->len[MQ] + 1;
    while (q->len[MQ] && budget) {
        budget--;
        int t = q->head[MQ];
        l_move_to_tail(q, MQ, t);
        if (ex_has(x, o->base.klo + t)) continue;
        if (o->freq[t] > 0) o->freq[t]--;
        else {
            l_remove(q, t);
            return t;
        }
    }
    return -1;
}

/* S3FIFO._evict_s */
static inline int s3_evict_s(S3Store *o, const Exclude *x) {
    Lists *q = &o->q;
    while (q->len[SQ]) {
        int t = q->head[SQ];
        if (o->freq[t] > 1 || ex_has(x, o->base.klo + t)) {
            l_move_to_tail(q, MQ, t);
            if ((double)q->len[MQ] >= o->m_limit) {
                /* "if M is full then evictM()": that eviction is this load's victim */
                int v = s3_evict_m(o, x);
                if (v >= 0) return v;
            }
        } else {
            l_move_to_tail(q, GQ, t);                    /* S3FIFO._ghost */
            if (q->len[GQ] > o->g_cap) l_remove(q, q->head[GQ]);
            return t;
        }
    }
    return -1;
}

static inline int s3_evict(Store *s, const Exclude *x, int incoming) {
    (void)incoming;
    S3Store *o = (S3Store *)s;
    int v = -1;
    if ((double)o->q.len[SQ] >= o->s_limit) v = s3_evict_s(o, x);
    if (v < 0) v = s3_evict_m(o, x);
    if (v < 0 && o->q.len[SQ]) v = s3_evict_s(o, x);
    if (v < 0) return -1;
    o->freq[v] = 0;
    return s->klo + v;
}

#endif
