/* What the store units (store_*.c) share, as static inline code: doubly linked lists over a
 * store's key indices, an indexed binary heap over them, an in-place sort for keys(), and
 * exact arithmetic on int64 counters. A store indexes its per-key arrays by i = key - klo.
 * Nothing here allocates but lists_init and the *_alloc helpers, which a store calls from
 * its init only.
 */
#ifndef MPL_STORE_IMPL_H
#define MPL_STORE_IMPL_H

#include <stdint.h>
#include <stdlib.h>

#include "store.h"

/* the number of keys a store serves (store_make checks 0 < khi - klo <= INT_MAX) */
static inline int st_n(const Store *s) { return s->khi - s->klo; }

/* an array of n >= 1 elements of `size` bytes, zeroed; NULL when memory ran out */
static inline void *st_zalloc(size_t n, size_t size) {
    if (n == 0 || n > SIZE_MAX / size) return NULL;
    return calloc(n, size);
}

/* ---------------------------------------------------------------- lists */
/* nl FIFO lists over the indices [0, n): each index is in at most one list */
typedef struct {
    int *prv, *nxt;          /* per index: neighbours towards the head / the tail, -1: none */
    int *lid;                /* per index: its list, -1: in none */
    int *head, *tail;        /* per list: the oldest and the newest index, -1 when empty */
    long *len;               /* per list */
    int nl;
} Lists;

static inline int lists_init(Lists *q, int n, int nl) {
    q->nl = nl;
    q->prv = st_zalloc(n, sizeof(int));
    q->nxt = st_zalloc(n, sizeof(int));
    q->lid = st_zalloc(n, sizeof(int));
    q->head = st_zalloc(nl, sizeof(int));
    q->tail = st_zalloc(nl, sizeof(int));
    q->len = st_zalloc(nl, sizeof(long));
    if (!q->prv || !q->nxt || !q->lid || !q->head || !q->tail || !q->len) return -1;
    for (int i = 0; i < n; i++) q->lid[i] = -1;
    for (int l = 0; l < nl; l++) q->head[l] = q->tail[l] = -1;
    return 0;
}

static inline void lists_fini(Lists *q) {
    free(q->prv); free(q->nxt); free(q->lid); free(q->head); free(q->tail); free(q->len);
}

/* append index i (in no list) at the tail of list l */
static inline void l_push(Lists *q, int l, int i) {
    q->lid[i] = l;
    q->nxt[i] = -1;
    q->prv[i] = q->tail[l];
    if (q->tail[l] >= 0) q->nxt[q->tail[l]] = i; else q->head[l] = i;
    q->tail[l] = i;
    q->len[l]++;
}

/* take index i out of its list (it is in one) */
static inline void l_remove(Lists *q, int i) {
    int l = q->lid[i], p = q->prv[i], n = q->nxt[i];
    if (p >= 0) q->nxt[p] = n; else q->head[l] = n;
    if (n >= 0) q->prv[n] = p; else q->tail[l] = p;
    q->len[l]--;
    q->lid[i] = -1;
}

/* i to the tail of list l (OrderedDict.move_to_end, or a move from another list) */
static inline void l_move_to_tail(Lists *q, int l, int i) {
    l_remove(q, i);
    l_push(q, l, i);
}

/* the first index of list l (oldest first) whose key (klo + index) is not excluded, or -1 */
static inline int l_first_free(const Lists *q, int l, const Exclude *x, int klo) {
    for (int i = q->head[l]; i >= 0; i = q->nxt[i])
        if (!ex_has(x, klo + i)) return i;
    return -1;
}

/* writes the keys of list l, oldest first, to out; returns how many */
static inline long l_keys(const Lists *q, int l, int klo, int *out) {
    long j = 0;
    for (int i = q->head[l]; i >= 0; i = q->nxt[i]) out[j++] = klo + i;
    return j;
}

/* ---------------------------------------------------------------- keys() order */
/* Sorts the indices a[0..n) in place by less(s, x, y), which must be a strict total order on
 * them (every rule's keys() order ends with a tie-break that is unique per key, so any correct
 * sort gives Python's sorted() order): a heapsort, which needs no memory (keys() never
 * allocates). */
typedef int (*IdxLess)(const Store *s, int x, int y);

static inline void idx_sift(int *a, long i, long n, IdxLess less, const Store *s) {
    int v = a[i];
    for (;;) {
        long c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && less(s, a[c], a[c + 1])) c++;
        if (!less(s, v, a[c])) break;
        a[i] = a[c];
        i = c;
    }
    a[i] = v;
}

/* keys(): the indices a[0..n) sorted, then made keys (klo + index); returns n */
static inline long idx_keys(int *a, long n, IdxLess less, const Store *s) {
    for (long i = n / 2 - 1; i >= 0; i--) idx_sift(a, i, n, less, s);
    for (long m = n - 1; m > 0; m--) {
        int t = a[0];
        a[0] = a[m];
        a[m] = t;
        idx_sift(a, 0, m, less, s);
    }
    for (long j = 0; j < n; j++) a[j] += s->klo;
    return n;
}

/* ---------------------------------------------------------------- exact int64 arithmetic */
/* (double)(a - b) for the exact difference (65 bits wide at most), rounded once as Python
 * rounds an int to a float: the subtraction itself never overflows */
static inline double i64_diff(int64_t a, int64_t b) {
    if (a >= b) return (double)((uint64_t)a - (uint64_t)b);
    return -(double)((uint64_t)b - (uint64_t)a);
}

/* x * 2^sx > y * 2^sy for x, y < 2^64 and shifts in [0, 63], exactly (Python's unbounded
 * `x << sx > y << sy`) */
static inline int u64_shl_gt(uint64_t x, int sx, uint64_t y, int sy) {
    if (sx >= sy) {
        int d = sx - sy;
        if (d && x > (UINT64_MAX >> d)) return 1;          /* x * 2^d >= 2^64 > y */
        return (x << d) > y;
    }
    int d = sy - sx;
    if (y > (UINT64_MAX >> d)) return 0;                   /* y * 2^d >= 2^64 > x */
    return x > (y << d);
}

/* ---------------------------------------------------------------- indexed binary heap */
/* A binary heap of indices with each index's position (pos[i], -1 when not in it), ordered
 * by a rule's strict total order LESS(store, i, j), and the best-first search for the least
 * index whose key is not excluded. IHEAP_DEFINE(P, T, LESS) defines P_up, P_down, P_push,
 * P_remove_at, P_rebuild and P_first_free for a store struct T with an IHeap field `h`. */
typedef struct {
    int *a;                  /* the heap: indices */
    long n;
    int *pos;                /* per index: its place in a, -1 when not in the heap */
    int *fr;                 /* the best-first search's frontier (n + 1 places) */
} IHeap;

static inline int iheap_init(IHeap *h, int n) {
    h->n = 0;
    h->a = st_zalloc(n, sizeof(int));
    h->pos = st_zalloc(n, sizeof(int));
    h->fr = st_zalloc((size_t)n + 1, sizeof(int));
    if (!h->a || !h->pos || !h->fr) return -1;
    for (int i = 0; i < n; i++) h->pos[i] = -1;
    return 0;
}

static inline void iheap_fini(IHeap *h) { free(h->a); free(h->pos); free(h->fr); }

#define IHEAP_DEFINE(P, T, LESS)                                                              \
static inline void P##_up(T *s, long i) {                                                    \
    IHeap *h = &s->h;                                                                         \
    int k = h->a[i];                                                                          \
    while (i > 0) {                                                                           \
        long p = (i - 1) >> 1;                                                                \
        int pk = h->a[p];                                                                     \
        if (!LESS(s, k, pk)) break;                                                           \
        h->a[i] = pk; h->pos[pk] = (int)i;                                                    \
        i = p;                                                                                \
    }                                                                                         \
    h->a[i] = k; h->pos[k] = (int)i;                                                          \
}                                                                                             \
static inline void P##_down(T *s, long i) {                                                  \
    IHeap *h = &s->h;                                                                         \
    int k = h->a[i];                                                                          \
    long n = h->n;                                                                            \
    for (;;) {                                                                                \
        long l = 2 * i + 1;                                                                   \
        if (l >= n) break;                                                                    \
        long m = l;                                                                           \
        if (l + 1 < n) m = l + LESS(s, h->a[l + 1], h->a[l]);                                 \
        int mk = h->a[m];                                                                     \
        if (!LESS(s, mk, k)) break;                                                           \
        h->a[i] = mk; h->pos[mk] = (int)i;                                                    \
        i = m;                                                                                \
    }                                                                                         \
    h->a[i] = k; h->pos[k] = (int)i;                                                          \
}                                                                                             \
static inline void P##_push(T *s, int k) {                                                   \
    s->h.a[s->h.n] = k;                                                                       \
    s->h.pos[k] = (int)s->h.n;                                                                \
    s->h.n++;                                                                                 \
    P##_up(s, s->h.n - 1);                                                                    \
}                                                                                             \
static inline void P##_remove_at(T *s, long i) {                                             \
    IHeap *h = &s->h;                                                                         \
    int k = h->a[i];                                                                          \
    h->n--;                                                                                   \
    h->pos[k] = -1;                                                                           \
    if (i < h->n) {                      /* the last index fills the hole: down, or up */   \
        int m = h->a[h->n];                                                                   \
        h->a[i] = m; h->pos[m] = (int)i;                                                      \
        P##_down(s, i);                                                                       \
        P##_up(s, h->pos[m]);                                                                 \
    }                                                                                         \
}                                                                                             \
static inline void P##_rebuild(T *s) {                                                       \
    for (long i = s->h.n / 2 - 1; i >= 0; i--) P##_down(s, i);                               \
}                                                                                             \
/* the frontier: heap places whose ancestors were all excluded, itself a binary heap in the */\
/* same order, so that X excluded keys cost O(X log X); it never holds more than n + 1 */     \
static inline void P##_fr_push(T *s, long *nf, int v) {                                      \
    int *fr = s->h.fr;                                                                        \
    long i = (*nf)++;                                                                         \
    while (i > 0) {                                                                           \
        long p = (i - 1) >> 1;                                                                \
        if (!LESS(s, s->h.a[v], s->h.a[fr[p]])) break;                                        \
        fr[i] = fr[p];                                                                        \
        i = p;                                                                                \
    }                                                                                         \
    fr[i] = v;                                                                                \
}                                                                                             \
static inline int P##_fr_pop(T *s, long *nf) {                                               \
    int *fr = s->h.fr;                                                                        \
    int top = fr[0], v = fr[--(*nf)];                                                         \
    long n = *nf, i = 0;                                                                      \
    if (n == 0) return top;                                                                   \
    for (;;) {                                                                                \
        long l = 2 * i + 1, m = i;                                                            \
        int best = v;                                                                         \
        if (l < n && LESS(s, s->h.a[fr[l]], s->h.a[best])) { m = l; best = fr[l]; }          \
        if (l + 1 < n && LESS(s, s->h.a[fr[l + 1]], s->h.a[best])) m = l + 1;                \
        if (m == i) break;                                                                    \
        fr[i] = fr[m];                                                                        \
        i = m;                                                                                \
    }                                                                                         \
    fr[i] = v;                                                                                \
    return top;                                                                               \
}                                                                                             \
/* the heap place of the least index whose key is not excluded, -1 when there is none */     \
static inline long P##_first_free(T *s, const Exclude *x) {                                  \
    IHeap *h = &s->h;                                                                         \
    if (h->n == 0) return -1;                                                                 \
    long nf = 0;                                                                              \
    h->fr[nf++] = 0;                                                                          \
    while (nf) {                                                                              \
        long i = P##_fr_pop(s, &nf);                                                          \
        if (!ex_has(x, s->base.klo + h->a[i])) return i;                                      \
        if (2 * i + 1 < h->n) P##_fr_push(s, &nf, (int)(2 * i + 1));                          \
        if (2 * i + 2 < h->n) P##_fr_push(s, &nf, (int)(2 * i + 2));                          \
    }                                                                                         \
    return -1;                                                                                \
}

/* ---------------------------------------------------------------- shared ops */
/* resize for a rule whose decisions do not depend on the capacity */
static inline void st_resize_plain(Store *s, long cap) { s->cap = cap; }

/* set_param for a rule that reads no parameter */
static inline void st_set_param_none(Store *s, int param, double v) {
    (void)s; (void)param; (void)v;
}

/* the engine's segmented pair "a | b" over two stores made for the same keys and capacity
 * (store_segmented.c; stores.c's store_make): 0 and *out, taking a and b; -1 when memory ran
 * out (a and b are then freed) */
int segmented_make(Store **out, Store *a, Store *b);

/* weighted_sum over the n (2..8) stores `parts`, made for the same keys and capacity, with
 * their weights w (store_weighted.c; stores.c's store_make_weighted): as segmented_make */
int weighted_make(Store **out, Store *const *parts, const double *w, int n);

#endif
