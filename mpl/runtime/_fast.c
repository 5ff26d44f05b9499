/* mpl.runtime._fast: the compiled replay kernel of the policy runtime.
 *
 * One function, replay(), runs a whole packed trace through the caches of a demand-only
 * policy (schedule gpu_only, no prefetch, no TTL/memory triggers, no monitor or adapt
 * rules; eviction lru, lfu, score, arc or s3fifo; a shared cache or per-layer caches with
 * static capacities; pins; priority routing) and plays every dispatch on the simulated
 * timeline's demand formula, without returning to Python per dispatch. Its decisions are
 * those of the pure-Python runtime (mpl/runtime/eviction*.py, core.py and the generated
 * dispatch) step by step: the same victims, the same slots, the same floating-point sums in
 * the same order. The Python glue (mpl/runtime/fast.py) decides which policies it covers,
 * packs the records and writes the results back into the Runtime; the pure-Python runtime
 * stays the reference (tests/test_fast_equivalence.py compares the two).
 *
 * Keys are ints: layer * num_experts + expert.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <structmember.h>

enum { R_LRU = 0, R_LFU = 1, R_SCORE = 2, R_ARC = 3, R_S3FIFO = 4, R_LFRU = 5, R_FT = 6, R_SEG = 7,
       R_CRF = 8, R_CLASSLRU = 9, R_VLFRU = 10, R_FAR = 11 };
#define R_LAST R_FAR

typedef struct Cache_ {
    int rule;
    long cap;
    long nres;             /* residents, pinned ones included */
    int lbase;             /* index of this cache's first list in the list tables */
    /* heap (lfu, score) */
    int *heap;
    long hn;
    double inc;            /* lfu: 1 / scale */
    long long tick;
    long long clock;
    double decay;
    long long interval;
    double alpha;
    /* arc */
    double p;
    /* s3fifo */
    double s_limit, m_limit;
    long g_cap;
    /* lfru */
    long u_cap, p_cap;
    /* frequency_threshold: per layer a ring of its last W accesses, counts per key. A
     * replay gives each layer room for min(W, its accesses in the replay): it never holds
     * more; the live dispatch makes room before each dispatch (ft_reserve) */
    int **wr;              /* layer l's ring (NULL: no room yet) */
    long *wroom, *whead, *wlen;
    long wL;               /* the layers these are allocated for */
    int *cnt;
    long W, E;
    double thr;
    /* crf, classlru, farthest_layer (eviction_moe.py): the step and the layer the pass is
     * at (Store.begin), the CRF half-life; the keys this cache holds are [klo, khi);
     * farthest_layer's LRU lists: fspan of them from fbase (one per layer of a shared
     * cache) */
    long long now;
    long cur;
    double h;
    long klo, khi;
    int fbase, fspan;
    /* segmented a | b: the two single-queue stores, a's share */
    struct Cache_ *sub[2];
    long a_cap;
} Cache;

typedef struct {
    long K;
    int *slot;        /* key -> slot, -1 when not resident */
    int *lid;         /* key -> list it is in, -1 none */
    int *prv, *nxt;   /* doubly linked lists over keys */
    int *lh, *lt;     /* list head (oldest) / tail (newest) */
    long *ln;         /* list lengths */
    int *pos;         /* key -> heap index */
    double *hf;       /* heap value */
    long long *ht;    /* heap tie-break tick */
    unsigned char *freq;
    long long *mark;  /* key -> stamp of the dispatch using it */
    long long stamp;
    int exmode, exkey;  /* exmode 1: only exkey is excluded (-1: none), not the keys in use */
    unsigned char *side;  /* segmented: 1 in a, 2 in b */
    double *kcrf;         /* crf, classlru: per key its CRF and the step of its last use */
    long long *klast;     /*   (-1: never used), kept across evictions */
    int *frontier;
    /* TTL: keys by last access (oldest first), with their stamps */
    int *tprv, *tnxt;
    long long *tstamp;
    unsigned char *tin;
    int thead, ttail;
    /* the slot pool's free list (SlotPool.free: a stack, last = next taken) */
    int *fstack;
    long ftop;
} State;

/* ---------------------------------------------------------------- lists */
static inline void l_push(State *S, int l, int k) {
    S->lid[k] = l;
    S->nxt[k] = -1;
    S->prv[k] = S->lt[l];
    if (S->lt[l] >= 0) S->nxt[S->lt[l]] = k; else S->lh[l] = k;
    S->lt[l] = k;
    S->ln[l]++;
}

static inline void l_remove(State *S, int k) {
    int l = S->lid[k];
    int p = S->prv[k], n = S->nxt[k];
    if (p >= 0) S->nxt[p] = n; else S->lh[l] = n;
    if (n >= 0) S->prv[n] = p; else S->lt[l] = p;
    S->ln[l]--;
    S->lid[k] = -1;
}

static inline int excluded(State *S, int k) {
    if (S->exmode) return k == S->exkey;
    return S->mark[k] == S->stamp;
}

/* the first key of list l (oldest first) not in use, or -1 */
static inline int l_first_free(State *S, int l) {
    for (int k = S->lh[l]; k >= 0; k = S->nxt[k])
        if (!excluded(S, k)) return k;
    return -1;
}

/* ---------------------------------------------------------------- heap */
/* the heap order: (value, tick) for lfu and score; (g, last use, load order) for crf, whose
 * value is g = log2(CRF at its last use) + last / H (hf), tick its load order (ht) */
static inline int h_less(State *S, Cache *c, int a, int b) {
    double fa = S->hf[a], fb = S->hf[b];
    if (fa != fb) return fa < fb;
    if (c->rule == R_CRF && S->klast[a] != S->klast[b]) return S->klast[a] < S->klast[b];
    return S->ht[a] < S->ht[b];
}

static inline void h_set(State *S, Cache *c, long i, int k) { c->heap[i] = k; S->pos[k] = (int)i; }

/* h_less for lfu and score, (value, tick), without branches on the data: the comparisons
 * of a sift are as good as random to the branch predictor (most of the time of an lfu
 * replay was its mispredictions) */
#define VT_LESS(fa, ta, fb, tb) (((fa) < (fb)) | (((fa) == (fb)) & ((ta) < (tb))))

static void h_up(State *S, Cache *c, long i) {
    int k = c->heap[i];
    if (c->rule != R_CRF) {
        int *heap = c->heap, *pos = S->pos;
        const double *hf = S->hf;
        const long long *ht = S->ht;
        double fk = hf[k];
        long long tk = ht[k];
        while (i > 0) {
            long p = (i - 1) >> 1;
            int pk = heap[p];
            if (!VT_LESS(fk, tk, hf[pk], ht[pk])) break;
            heap[i] = pk; pos[pk] = (int)i;
            i = p;
        }
        heap[i] = k; pos[k] = (int)i;
        return;
    }
    while (i > 0) {
        long p = (i - 1) >> 1;
        int pk = c->heap[p];
        if (!h_less(S, c, k, pk)) break;
        h_set(S, c, i, pk);
        i = p;
    }
    h_set(S, c, i, k);
}

static void h_down(State *S, Cache *c, long i) {
    int k = c->heap[i];
    long n = c->hn;
    if (c->rule != R_CRF) {
        int *heap = c->heap, *pos = S->pos;
        const double *hf = S->hf;
        const long long *ht = S->ht;
        double fk = hf[k];
        long long tk = ht[k];
        for (;;) {
            long l = 2 * i + 1;
            if (l >= n) break;
            long m = l;
            if (l + 1 < n) {
                int a = heap[l + 1], b = heap[l];
                m = l + VT_LESS(hf[a], ht[a], hf[b], ht[b]);
            }
            int mk = heap[m];
            if (!VT_LESS(hf[mk], ht[mk], fk, tk)) break;
            heap[i] = mk; pos[mk] = (int)i;
            i = m;
        }
        heap[i] = k; pos[k] = (int)i;
        return;
    }
    for (;;) {
        long l = 2 * i + 1;
        if (l >= n) break;
        long m = l;
        if (l + 1 < n && h_less(S, c, c->heap[l + 1], c->heap[l])) m = l + 1;
        if (!h_less(S, c, c->heap[m], k)) break;
        h_set(S, c, i, c->heap[m]);
        i = m;
    }
    h_set(S, c, i, k);
}

static void h_push(State *S, Cache *c, int k) {
    h_set(S, c, c->hn, k);
    c->hn++;
    h_up(S, c, c->hn - 1);
}

static void h_remove_at(State *S, Cache *c, long i) {
    int k = c->heap[i];
    c->hn--;
    S->pos[k] = -1;
    if (i < c->hn) {
        h_set(S, c, i, c->heap[c->hn]);
        h_down(S, c, i);
        h_up(S, c, i);
    }
}

static void h_rebuild(State *S, Cache *c) {
    for (long i = c->hn / 2 - 1; i >= 0; i--) h_down(S, c, i);
}

/* The least resident not excluded, found best-first: a frontier of heap indices whose
 * parents were all excluded, itself kept as a binary heap (ordered as the cache's heap), so
 * that X excluded residents cost O(X log X), not O(X^2). The frontier never holds more than
 * the cache's residents plus one (each visit removes one index and adds at most two). */
#define FR_LESS(a, b) h_less(S, c, c->heap[(a)], c->heap[(b)])
static inline void fr_push(State *S, Cache *c, int *fr, long *nf, int v) {
    long i = (*nf)++;
    while (i > 0) {
        long p = (i - 1) >> 1;
        if (!FR_LESS(v, fr[p])) break;
        fr[i] = fr[p];
        i = p;
    }
    fr[i] = v;
}

static inline int fr_pop(State *S, Cache *c, int *fr, long *nf) {
    int top = fr[0], v = fr[--(*nf)];
    long n = *nf, i = 0;
    if (n == 0) return top;
    for (;;) {
        long l = 2 * i + 1, m = i;
        int best = v;
        if (l < n && FR_LESS(fr[l], best)) { m = l; best = fr[l]; }
        if (l + 1 < n && FR_LESS(fr[l + 1], best)) m = l + 1;
        if (m == i) break;
        fr[i] = fr[m];
        i = m;
    }
    fr[i] = v;
    return top;
}
#undef FR_LESS

static long h_first_free(State *S, Cache *c) {   /* its heap index, -1 */
    if (c->hn == 0) return -1;
    int *fr = S->frontier;
    long nf = 0;
    fr[nf++] = 0;
    while (nf) {
        long i = fr_pop(S, c, fr, &nf);
        if (!excluded(S, c->heap[i])) return i;
        if (2 * i + 1 < c->hn) fr_push(S, c, fr, &nf, (int)(2 * i + 1));
        if (2 * i + 2 < c->hn) fr_push(S, c, fr, &nf, (int)(2 * i + 2));
    }
    return -1;
}

static int h_evict(State *S, Cache *c) {
    long i = h_first_free(S, c);
    if (i < 0) return -1;
    int k = c->heap[i];
    h_remove_at(S, c, i);
    return k;
}

/* ---------------------------------------------------------------- lfu */
static void lfu_clock(State *S, Cache *c) {
    c->clock++;
    if (c->clock >= c->interval) {
        c->clock = 0;
        c->inc /= c->decay;
        if (c->inc > 1e150) {        /* LFU._renormalise */
            double f = 1.0 / c->inc;
            c->inc = 1.0;
            for (long i = 0; i < c->hn; i++) {
                int k = c->heap[i];
                S->hf[k] = S->hf[k] * f;
            }
            h_rebuild(S, c);
        }
    }
}

/* ---------------------------------------------------------------- arc */
#define T1(c) ((c)->lbase)
#define T2(c) ((c)->lbase + 1)
#define B1(c) ((c)->lbase + 2)
#define B2(c) ((c)->lbase + 3)

static void arc_miss(State *S, Cache *c, int k) {
    double cap = (double)c->cap;
    long b1 = S->ln[B1(c)], b2 = S->ln[B2(c)];
    if (S->lid[k] == B1(c)) {
        double d = b1 >= b2 ? 1.0 : (double)b2 / (double)b1;
        double x = c->p + d;
        c->p = x < cap ? x : cap;
    } else if (S->lid[k] == B2(c)) {
        double d = b2 >= b1 ? 1.0 : (double)b1 / (double)b2;
        double x = c->p - d;
        c->p = x > 0.0 ? x : 0.0;
    } else {
        long t1 = S->ln[T1(c)], t2 = S->ln[T2(c)];
        long l1 = t1 + b1;
        if (l1 >= c->cap) {
            if (t1 < c->cap && b1) l_remove(S, S->lh[B1(c)]);
        } else if (l1 + t2 + b2 >= c->cap && l1 + t2 + b2 >= 2 * c->cap && b2) {
            l_remove(S, S->lh[B2(c)]);
        }
    }
}

static int arc_evict(State *S, Cache *c, int incoming) {   /* incoming -1: None */
    int in_b1 = incoming >= 0 && S->lid[incoming] == B1(c);
    int in_b2 = incoming >= 0 && S->lid[incoming] == B2(c);
    if (incoming >= 0 && !in_b1 && !in_b2 && S->ln[T1(c)] >= c->cap) {
        int v = l_first_free(S, T1(c));
        if (v >= 0) { l_remove(S, v); return v; }
    }
    long n1 = S->ln[T1(c)];
    int first, second;
    if (n1 && ((double)n1 > c->p || (in_b2 && (double)n1 == c->p))) { first = 0; second = 1; }
    else { first = 1; second = 0; }
    int order[2] = {first, second};
    for (int j = 0; j < 2; j++) {
        int t = c->lbase + order[j], b = c->lbase + 2 + order[j];
        int v = l_first_free(S, t);
        if (v >= 0) { l_remove(S, v); l_push(S, b, v); return v; }
    }
    return -1;
}

static void arc_insert(State *S, Cache *c, int k) {
    int l = S->lid[k];
    if (l == B1(c) || l == B2(c)) { l_remove(S, k); l_push(S, T2(c), k); }
    else l_push(S, T1(c), k);
}

/* ---------------------------------------------------------------- s3fifo */
#define SQ(c) ((c)->lbase)
#define MQ(c) ((c)->lbase + 1)
#define GQ(c) ((c)->lbase + 2)

static int s3_evict_m(State *S, Cache *c) {
    long budget = 4 * S->ln[MQ(c)] + 1;
    while (S->ln[MQ(c)] && budget) {
        budget--;
        int t = S->lh[MQ(c)];
        l_remove(S, t);
        if (excluded(S, t)) { l_push(S, MQ(c), t); continue; }
        if (S->freq[t] > 0) { l_push(S, MQ(c), t); S->freq[t]--; }
        else return t;
    }
    return -1;
}

static int s3_evict_s(State *S, Cache *c) {
    while (S->ln[SQ(c)]) {
        int t = S->lh[SQ(c)];
        l_remove(S, t);
        if (S->freq[t] > 1 || excluded(S, t)) {
            l_push(S, MQ(c), t);
            if ((double)S->ln[MQ(c)] >= c->m_limit) {
                int v = s3_evict_m(S, c);
                if (v >= 0) return v;
            }
        } else {
            l_push(S, GQ(c), t);                        /* _ghost */
            if (S->ln[GQ(c)] > c->g_cap) l_remove(S, S->lh[GQ(c)]);
            return t;
        }
    }
    return -1;
}

static int s3_evict(State *S, Cache *c) {
    int v = -1;
    if ((double)S->ln[SQ(c)] >= c->s_limit) v = s3_evict_s(S, c);
    if (v < 0) v = s3_evict_m(S, c);
    if (v < 0 && S->ln[SQ(c)]) v = s3_evict_s(S, c);
    return v;
}

/* ---------------------------------------------------------------- lfru */
#define PRIV(c) ((c)->lbase)
#define UNPRIV(c) ((c)->lbase + 1)

static void lfru_clock(State *S, Cache *c) {
    c->clock++;
    if (c->clock >= c->interval) {
        c->clock = 0;
        double d = c->decay;
        for (int k = S->lh[UNPRIV(c)]; k >= 0; k = S->nxt[k]) S->hf[k] = S->hf[k] * d;
    }
}

static void lfru_demote(State *S, Cache *c, int protect) {
    while (S->ln[PRIV(c)] > c->p_cap) {
        int v = -1;
        for (int k = S->lh[PRIV(c)]; k >= 0; k = S->nxt[k])
            if (k != protect) { v = k; break; }
        if (v < 0) break;
        l_remove(S, v);
        S->hf[v] = 1.0;
        S->ht[v] = ++c->tick;
        l_push(S, UNPRIV(c), v);
    }
}

static int lfru_evict(State *S, Cache *c) {
    int best = -1;
    for (int k = S->lh[UNPRIV(c)]; k >= 0; k = S->nxt[k]) {
        if (excluded(S, k)) continue;
        if (best < 0 || h_less(S, c, k, best)) best = k;
    }
    if (best >= 0) { l_remove(S, best); return best; }
    int v = l_first_free(S, PRIV(c));
    if (v >= 0) l_remove(S, v);
    return v;
}

/* ---------------------------------------------------------------- crf, classlru, vllm_lfru,
 * farthest_layer: the rules of serving engines (mpl/runtime/eviction_moe.py, the reference) */
/* _CRFTable.use: a use of key k at the cache's step -> its CRF (at most one per step) */
static double crf_use(State *S, Cache *c, int k) {
    long long last = S->klast[k], now = c->now;
    double v;
    if (last < 0) v = 1.0;
    else if (last == now) return S->kcrf[k];
    else v = S->kcrf[k] * pow(2.0, (double)(last - now) / c->h) + 1.0;
    S->kcrf[k] = v;
    S->klast[k] = now;
    return v;
}

/* _CRFTable.value: the CRF decayed to the cache's step (0 for a key never used) */
static inline double crf_value(State *S, Cache *c, int k) {
    long long last = S->klast[k];
    if (last < 0) return 0.0;
    return S->kcrf[k] * pow(2.0, (double)(last - c->now) / c->h);
}

/* CRF._entry: the heap value of k from its table row */
static inline void crf_g(State *S, Cache *c, int k) {
    long long last = S->klast[k];
    S->hf[k] = last < 0 ? -INFINITY : log2(S->kcrf[k]) + (double)last / c->h;
}

/* CRF.evict: among the residents not in use whose g is within 1e-9 of the smallest such g,
 * the lowest (decayed CRF, last use, load order): no heap node below one past the limit
 * can be in the window */
static int crf_evict(State *S, Cache *c) {
    long i0 = h_first_free(S, c);
    if (i0 < 0) return -1;
    double lim = S->hf[c->heap[i0]] + 1e-9;
    int *st = S->frontier;
    long ns = 0;
    st[ns++] = 0;
    int best = -1;
    double bv = 0.0;
    while (ns) {
        long i = st[--ns];
        int k = c->heap[i];
        if (S->hf[k] > lim) continue;
        if (!excluded(S, k)) {
            double v = crf_value(S, c, k);
            if (best < 0 || v < bv || (v == bv && (S->klast[k] < S->klast[best] ||
                                                   (S->klast[k] == S->klast[best] && S->ht[k] < S->ht[best])))) {
                best = k;
                bv = v;
            }
        }
        if (2 * i + 1 < c->hn) st[ns++] = (int)(2 * i + 1);
        if (2 * i + 2 < c->hn) st[ns++] = (int)(2 * i + 2);
    }
    h_remove_at(S, c, S->pos[best]);
    return best;
}

/* ClassLRU.class_of */
static inline int cls_of(double crf) {
    if (crf < 1.0) return 0;
    int e;
    frexp(crf, &e);
    return e - 1 < 7 ? e - 1 : 7;
}

#define CLS(c, j) ((c)->lbase + (j))

static inline int cls_has(Cache *c, State *S, int k) {
    return S->lid[k] >= CLS(c, 0) && S->lid[k] <= CLS(c, 7);
}

/* ClassLRU._place; hf: the admission order (the order of ClassLRU.cls, its keys()'s ties) */
static void cls_place(State *S, Cache *c, int k, int cl) {
    if (cls_has(c, S, k)) l_remove(S, k);
    else S->hf[k] = (double)++c->tick;
    S->freq[k] = (unsigned char)cl;
    l_push(S, CLS(c, cl), k);
    S->ht[k] = c->now;
}

/* ClassLRU.evict: per class its least recent key used before this step and not in use;
 * the largest age / 2^class, ties to the lower class */
static int cls_evict(State *S, Cache *c) {
    int best = -1, best_c = 0;
    long long best_age = 0;
    for (int cl = 0; cl <= 7; cl++) {
        int cand = -1;
        for (int k = S->lh[CLS(c, cl)]; k >= 0; k = S->nxt[k]) {
            if (S->ht[k] >= c->now) break;      /* this one and every later one: used this step */
            if (excluded(S, k)) continue;
            cand = k;
            break;
        }
        if (cand < 0) continue;
        long long age = c->now - S->ht[cand];
        if (best < 0 || (age << best_c) > (best_age << cl)) { best = cand; best_age = age; best_c = cl; }
    }
    if (best >= 0) l_remove(S, best);
    return best;
}

/* VLLMLFRU.evict: the lowest freq / (clock - last + 1) not in use, ties to the earliest
 * loaded (the list is in load order) */
static int vl_evict(State *S, Cache *c) {
    int best = -1;
    double bs = 0.0;
    for (int k = S->lh[c->lbase]; k >= 0; k = S->nxt[k]) {
        if (excluded(S, k)) continue;
        double sc = S->hf[k] / (double)(c->tick - S->ht[k] + 1);
        if (best < 0 || sc < bs) { best = k; bs = sc; }
    }
    if (best >= 0) l_remove(S, best);
    return best;
}

static inline int far_list(Cache *c, int k) {
    return c->fbase + (c->fspan == 1 ? 0 : (int)(k / c->E));
}

/* FarthestLayer.evict: the current layer's least recent key not in use, else the layers
 * below it downwards, then from the highest down to the one above it */
static int far_evict(State *S, Cache *c) {
    for (long j = 0; j < c->fspan; j++) {
        long l = c->fspan == 1 ? 0 : ((c->cur - j) % c->fspan + c->fspan) % c->fspan;
        int v = l_first_free(S, c->fbase + (int)l);
        if (v >= 0) { l_remove(S, v); return v; }
    }
    return -1;
}

/* ---------------------------------------------------------------- frequency_threshold */
/* FrequencyThreshold._observe: the access enters its layer's window, the oldest entries
 * beyond W leave (more than one after W shrank). The ring has room for the entry unless
 * the window holds W or more (ft_reserve, or a replay's room): then the oldest is
 * overwritten, which is the append and the first of the departures. */
static void ft_observe(Cache *c, int k) {
    long layer = k / c->E;
    int e = (int)(k % c->E);
    long room = c->wroom[layer];
    if (room <= 0) return;           /* (no room: only a layer never accessed) */
    int *w = c->wr[layer];
    int *cnt = c->cnt + layer * c->E;
    cnt[e]++;
    if (c->wlen[layer] < room) {
        w[(c->whead[layer] + c->wlen[layer]) % room] = e;
        c->wlen[layer]++;
    } else {
        cnt[w[c->whead[layer]]]--;
        w[c->whead[layer]] = e;
        c->whead[layer] = (c->whead[layer] + 1) % room;
    }
    while (c->wlen[layer] > c->W) {
        cnt[w[c->whead[layer]]]--;
        c->whead[layer] = (c->whead[layer] + 1) % room;
        c->wlen[layer]--;
    }
}

/* room for `need` entries in layer's window (its entries kept, oldest first): -1 on
 * MemoryError */
static int ft_room(Cache *c, long layer, long need) {
    long room = c->wroom[layer];
    if (need <= room) return 0;
    long nr = room > c->W / 2 ? c->W : 2 * room;
    if (nr < need) nr = need;
    if (nr > (long)(PY_SSIZE_T_MAX / (Py_ssize_t)sizeof(int))) return -1;
    int *nw = malloc(sizeof(int) * nr);
    if (!nw) return -1;
    for (long j = 0; j < c->wlen[layer]; j++) nw[j] = c->wr[layer][(c->whead[layer] + j) % room];
    free(c->wr[layer]);
    c->wr[layer] = nw;
    c->wroom[layer] = nr;
    c->whead[layer] = 0;
    return 0;
}

/* room in layer's window for n more entries (up to W, or what it holds beyond a W that
 * shrank): -1 on MemoryError */
static int ft_reserve(Cache *c, long layer, long n) {
    long need = c->wlen[layer] + n;
    if (need > c->W) need = c->W > c->wlen[layer] ? c->W : c->wlen[layer];
    return ft_room(c, layer, need);
}

static inline double ft_share(Cache *c, int k) {
    long layer = k / c->E;
    long n = c->wlen[layer];
    if (!n) return 0.0;
    return (double)c->cnt[k] / (double)n;
}

static inline int ft_less(State *S, Cache *c, int a, int b) {   /* (share, last access) */
    double sa = ft_share(c, a), sb = ft_share(c, b);
    return sa < sb || (sa == sb && S->ht[a] < S->ht[b]);
}

static int ft_evict(State *S, Cache *c) {
    int best = -1;
    for (int k = S->lh[c->lbase]; k >= 0; k = S->nxt[k]) {
        if (excluded(S, k)) continue;
        if (best < 0 || ft_less(S, c, k, best)) best = k;
    }
    if (best >= 0) l_remove(S, best);
    return best;
}

/* ---------------------------------------------------------------- the store protocol */
static void st_hit(State *S, Cache *c, int k, double w);
static void st_miss(State *S, Cache *c, int k);
static int st_evict(State *S, Cache *c, int incoming);
static void st_insert(State *S, Cache *c, int k, double w);
static void st_discard(State *S, Cache *c, int k);
static long st_len(State *S, Cache *c);

static inline int needs_miss(Cache *c) {
    return c->rule == R_LFU || c->rule == R_ARC || c->rule == R_LFRU || c->rule == R_FT ||
           c->rule == R_SEG || c->rule == R_CRF || c->rule == R_CLASSLRU;
}

/* Store.begin(step, layer): a dispatch starts (the rules that read the step or the layer) */
static inline void st_begin(Cache *c, long long step, long layer) {
    c->now = step;
    c->cur = layer;
}

/* Segmented._demote: a over its share -> its victims (sparing ``protect``) move to b */
static void seg_demote(State *S, Cache *c, int protect) {
    Cache *a = c->sub[0], *b = c->sub[1];
    while (st_len(S, a) > c->a_cap) {
        int m = S->exmode, x = S->exkey;
        S->exmode = 1;
        S->exkey = protect;
        int v = st_evict(S, a, -1);
        S->exmode = m;
        S->exkey = x;
        if (v < 0) break;
        st_insert(S, b, v, 0.0);
        S->side[v] = 2;
    }
}

static void seg_hit(State *S, Cache *c, int k, double w) {
    Cache *a = c->sub[0], *b = c->sub[1];
    if (S->side[k] == 1) { st_hit(S, a, k, w); return; }
    st_discard(S, b, k);               /* promotion: b -> a (the access still counts in a) */
    if (needs_miss(a)) st_miss(S, a, k);
    st_insert(S, a, k, w);
    S->side[k] = 1;
    seg_demote(S, c, k);
}

static int seg_evict(State *S, Cache *c) {
    int v = st_evict(S, c->sub[1], -1);
    if (v < 0) v = st_evict(S, c->sub[0], -1);
    if (v >= 0) S->side[v] = 0;
    return v;
}

static void st_hit(State *S, Cache *c, int k, double w) {
    switch (c->rule) {
    case R_LRU:
        l_remove(S, k); l_push(S, c->lbase, k);
        break;
    case R_LFU:
        S->hf[k] = S->hf[k] + c->inc;
        S->ht[k] = ++c->tick;
        h_down(S, c, S->pos[k]);
        lfu_clock(S, c);
        break;
    case R_SCORE: {
        double a = c->alpha;
        S->hf[k] = a * w + (1.0 - a) * S->hf[k];
        S->ht[k] = ++c->tick;
        long i = S->pos[k];
        h_up(S, c, i);
        h_down(S, c, S->pos[k]);
        break;
    }
    case R_ARC:
        l_remove(S, k); l_push(S, T2(c), k);
        break;
    case R_S3FIFO:
        if (S->freq[k] < 3) S->freq[k]++;
        break;
    case R_LFRU:
        c->tick++;
        if (S->lid[k] == PRIV(c)) { l_remove(S, k); l_push(S, PRIV(c), k); }
        else { l_remove(S, k); l_push(S, PRIV(c), k); lfru_demote(S, c, k); }
        lfru_clock(S, c);
        break;
    case R_FT:
        ft_observe(c, k);
        S->ht[k] = ++c->tick;
        break;
    case R_SEG:
        seg_hit(S, c, k, w);
        break;
    case R_CRF:
        crf_use(S, c, k);
        crf_g(S, c, k);
        h_down(S, c, S->pos[k]);
        h_up(S, c, S->pos[k]);
        break;
    case R_CLASSLRU:
        cls_place(S, c, k, cls_of(crf_use(S, c, k)));
        break;
    case R_VLFRU:
        c->tick++;
        S->hf[k] += 1.0;
        S->ht[k] = c->tick;
        break;
    case R_FAR:
        l_remove(S, k);
        l_push(S, far_list(c, k), k);
        break;
    }
}

static void st_miss(State *S, Cache *c, int k) {
    if (c->rule == R_LFU) lfu_clock(S, c);
    else if (c->rule == R_ARC) arc_miss(S, c, k);
    else if (c->rule == R_LFRU) lfru_clock(S, c);
    else if (c->rule == R_FT) ft_observe(c, k);
    else if (c->rule == R_SEG && needs_miss(c->sub[0])) st_miss(S, c->sub[0], k);
    else if (c->rule == R_CRF || c->rule == R_CLASSLRU) crf_use(S, c, k);
}

static int st_evict(State *S, Cache *c, int incoming) {
    switch (c->rule) {
    case R_LRU: {
        int v = l_first_free(S, c->lbase);
        if (v >= 0) l_remove(S, v);
        return v;
    }
    case R_LFU: case R_SCORE: return h_evict(S, c);
    case R_ARC: return arc_evict(S, c, incoming);
    case R_LFRU: return lfru_evict(S, c);
    case R_FT: return ft_evict(S, c);
    case R_SEG: return seg_evict(S, c);
    case R_CRF: return crf_evict(S, c);
    case R_CLASSLRU: return cls_evict(S, c);
    case R_VLFRU: return vl_evict(S, c);
    case R_FAR: return far_evict(S, c);
    default: return s3_evict(S, c);
    }
}

static void st_insert(State *S, Cache *c, int k, double w) {
    switch (c->rule) {
    case R_LRU: l_push(S, c->lbase, k); break;
    case R_LFU: S->hf[k] = c->inc; S->ht[k] = ++c->tick; h_push(S, c, k); break;
    case R_SCORE: S->hf[k] = w; S->ht[k] = ++c->tick; h_push(S, c, k); break;
    case R_ARC: arc_insert(S, c, k); break;
    case R_FT: S->ht[k] = ++c->tick; l_push(S, c->lbase, k); break;
    case R_SEG:
        st_insert(S, c->sub[0], k, w);
        S->side[k] = 1;
        seg_demote(S, c, k);
        break;
    case R_LFRU:
        c->tick++;
        if (c->u_cap == 0) { l_push(S, PRIV(c), k); lfru_demote(S, c, k); }
        else { S->hf[k] = 1.0; S->ht[k] = c->tick; l_push(S, UNPRIV(c), k); }
        break;
    case R_CRF:
        S->ht[k] = ++c->tick;          /* its load order */
        crf_g(S, c, k);
        h_push(S, c, k);
        break;
    case R_CLASSLRU:                   /* its class as of its last use */
        cls_place(S, c, k, S->klast[k] < 0 ? 0 : cls_of(S->kcrf[k]));
        break;
    case R_VLFRU:
        c->tick++;
        S->hf[k] = 1.0;
        S->ht[k] = c->tick;
        l_push(S, c->lbase, k);
        break;
    case R_FAR:
        l_push(S, far_list(c, k), k);
        break;
    default:
        if (S->lid[k] == GQ(c)) { l_remove(S, k); l_push(S, MQ(c), k); }
        else l_push(S, SQ(c), k);
        S->freq[k] = 0;
        break;
    }
}

/* Store.discard: a key removed from outside (TTL) */
static void st_discard(State *S, Cache *c, int k) {
    switch (c->rule) {
    case R_SEG:
        st_discard(S, S->side[k] == 1 ? c->sub[0] : c->sub[1], k);
        S->side[k] = 0;
        break;
    case R_LFU: case R_SCORE: case R_CRF:
        if (S->pos[k] >= 0) h_remove_at(S, c, S->pos[k]);
        break;
    case R_CLASSLRU:
        if (cls_has(c, S, k)) l_remove(S, k);
        break;
    case R_VLFRU:
        if (S->lid[k] == c->lbase) l_remove(S, k);
        break;
    case R_FAR:
        if (S->lid[k] >= c->fbase && S->lid[k] < c->fbase + c->fspan) l_remove(S, k);
        break;
    case R_S3FIFO:
        S->freq[k] = 0;
        /* fall through: leave S or M */
    default:
        if (S->lid[k] >= 0 && S->lid[k] < c->lbase + 2) l_remove(S, k);   /* lru; arc t1/t2 */
        break;
    }
}

/* len(store) */
static long st_len(State *S, Cache *c) {
    switch (c->rule) {
    case R_SEG: return st_len(S, c->sub[0]) + st_len(S, c->sub[1]);
    case R_LRU: case R_VLFRU: return S->ln[c->lbase];
    case R_LFU: case R_SCORE: case R_CRF: return c->hn;
    case R_CLASSLRU: {
        long n = 0;
        for (int cl = 0; cl <= 7; cl++) n += S->ln[CLS(c, cl)];
        return n;
    }
    case R_FAR: {
        long n = 0;
        for (int j = 0; j < c->fspan; j++) n += S->ln[c->fbase + j];
        return n;
    }
    default: return S->ln[c->lbase] + S->ln[c->lbase + 1];
    }
}

static inline void t_unlink(State *S, int k) {
    if (!S->tin[k]) return;
    int p = S->tprv[k], n = S->tnxt[k];
    if (p >= 0) S->tnxt[p] = n; else S->thead = n;
    if (n >= 0) S->tprv[n] = p; else S->ttail = p;
    S->tin[k] = 0;
}

static inline void t_touch(State *S, int k, long long stamp) {   /* ttl[key] = stamp; move_to_end */
    t_unlink(S, k);
    S->tstamp[k] = stamp;
    S->tin[k] = 1;
    S->tnxt[k] = -1;
    S->tprv[k] = S->ttail;
    if (S->ttail >= 0) S->tnxt[S->ttail] = k; else S->thead = k;
    S->ttail = k;
}

/* Store.admits (frequency_threshold, alone or as a segmented pair's a) */
static inline int st_admits(Cache *c, int k) {
    if (c->rule == R_SEG) c = c->sub[0];
    if (c->rule != R_FT) return 1;
    return ft_share(c, k) >= c->thr;
}

/* Store.resize(capacity) (Cache.set_capacity, a rebalance): what follows from the capacity */
static void st_resize(State *S, Cache *c, long cap) {
    c->cap = cap;
    switch (c->rule) {
    case R_ARC:
        if (c->p > (double)cap) c->p = (double)cap;
        while (S->ln[B1(c)] + S->ln[B2(c)] > cap) l_remove(S, S->ln[B1(c)] ? S->lh[B1(c)] : S->lh[B2(c)]);
        break;
    case R_S3FIFO: {
        c->s_limit = 0.1 * (double)cap;
        c->m_limit = (double)cap - c->s_limit;
        double g = 0.9 * (double)cap;
        long gi = (long)g;
        c->g_cap = gi > 1 ? gi : 1;
        while (S->ln[GQ(c)] > c->g_cap) l_remove(S, S->lh[GQ(c)]);
        break;
    }
    case R_LFRU:
        c->u_cap = cap / 3;
        c->p_cap = cap - c->u_cap;
        lfru_demote(S, c, -1);
        break;
    case R_SEG:
        c->a_cap = cap - cap / 3;
        seg_demote(S, c, -1);
        break;
    default:
        break;
    }
}

/* a list of the keys of list l, oldest first (NULL on error) */
static PyObject *list_keys(State *S, int l) {
    PyObject *out = PyList_New(S->ln[l]);
    if (!out) return NULL;
    long i = 0;
    for (int k = S->lh[l]; k >= 0 && i < S->ln[l]; k = S->nxt[k], i++) {
        PyObject *x = PyLong_FromLong(k);
        if (!x) { Py_DECREF(out); return NULL; }
        PyList_SET_ITEM(out, i, x);
    }
    return out;
}

/* [(key, value, tick)] of the keys of list l (lfru) or of the heap (lfu, score) */
static PyObject *valued_keys(State *S, Cache *c, int l) {
    long n = l >= 0 ? S->ln[l] : c->hn;
    PyObject *out = PyList_New(n);
    if (!out) return NULL;
    int k = l >= 0 ? S->lh[l] : -1;
    for (long i = 0; i < n; i++) {
        if (l < 0) k = c->heap[i];
        PyObject *x = Py_BuildValue("(idL)", k, S->hf[k], S->ht[k]);
        if (!x) { Py_DECREF(out); return NULL; }
        PyList_SET_ITEM(out, i, x);
        if (l >= 0) k = S->nxt[k];
    }
    return out;
}

/* [(key, crf, last use)] of the keys of c ever used (the CRF table, kept across evictions) */
static PyObject *crf_table(State *S, Cache *c) {
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    for (long k = c->klo; k < c->khi; k++) {
        if (S->klast[k] < 0) continue;
        PyObject *t = Py_BuildValue("(ldL)", k, S->kcrf[k], S->klast[k]);
        if (!t || PyList_Append(out, t) < 0) { Py_XDECREF(t); Py_DECREF(out); return NULL; }
        Py_DECREF(t);
    }
    return out;
}

/* the store's state in the format of its Python class's dump() (mpl/runtime/eviction*.py),
 * keys as ints (NULL on error) */
static PyObject *st_dump(State *S, Cache *c) {
    switch (c->rule) {
    case R_LRU: return list_keys(S, c->lbase);
    case R_LFU: {
        PyObject *ents = valued_keys(S, c, -1);
        return ents ? Py_BuildValue("(NdLLdL)", ents, c->inc, c->tick, c->clock, c->decay, c->interval) : NULL;
    }
    case R_SCORE: {
        PyObject *ents = valued_keys(S, c, -1);
        return ents ? Py_BuildValue("(NLd)", ents, c->tick, c->alpha) : NULL;
    }
    case R_FT: {
        PyObject *wins = PyList_New(0), *last = PyList_New(S->ln[c->lbase]);
        if (!wins || !last) { Py_XDECREF(wins); Py_XDECREF(last); return NULL; }
        for (long l = 0; l < c->wL; l++) {
            long n = c->wlen[l];
            if (!n) continue;
            PyObject *w = PyList_New(n);
            if (!w) goto ft_bad;
            for (long j = 0; j < n; j++) {
                PyObject *x = PyLong_FromLong(c->wr[l][(c->whead[l] + j) % c->wroom[l]]);
                if (!x) { Py_DECREF(w); goto ft_bad; }
                PyList_SET_ITEM(w, j, x);
            }
            PyObject *t = Py_BuildValue("(lN)", l, w);
            if (!t || PyList_Append(wins, t) < 0) { Py_XDECREF(t); goto ft_bad; }
            Py_DECREF(t);
        }
        {
            long i = 0;
            for (int k = S->lh[c->lbase]; k >= 0; k = S->nxt[k], i++) {
                PyObject *t = Py_BuildValue("(iL)", k, S->ht[k]);
                if (!t) goto ft_bad;
                PyList_SET_ITEM(last, i, t);
            }
        }
        return Py_BuildValue("(NNLdl)", wins, last, c->tick, c->thr, c->W);
    ft_bad:
        Py_DECREF(wins); Py_DECREF(last);
        return NULL;
    }
    case R_ARC: {
        PyObject *t1 = list_keys(S, T1(c)), *t2 = list_keys(S, T2(c)), *b1 = list_keys(S, B1(c)),
                 *b2 = list_keys(S, B2(c));
        if (!t1 || !t2 || !b1 || !b2) { Py_XDECREF(t1); Py_XDECREF(t2); Py_XDECREF(b1); Py_XDECREF(b2); return NULL; }
        return Py_BuildValue("(dNNNN)", c->p, t1, t2, b1, b2);
    }
    case R_S3FIFO: {
        PyObject *sq = list_keys(S, SQ(c)), *mq = list_keys(S, MQ(c)), *gq = list_keys(S, GQ(c));
        PyObject *fr = PyList_New(0);
        if (!sq || !mq || !gq || !fr) { Py_XDECREF(sq); Py_XDECREF(mq); Py_XDECREF(gq); Py_XDECREF(fr); return NULL; }
        for (int q = 0; q < 2; q++)
            for (int k = S->lh[c->lbase + q]; k >= 0; k = S->nxt[k]) {
                PyObject *t = Py_BuildValue("(ii)", k, (int)S->freq[k]);
                if (!t || PyList_Append(fr, t) < 0) {
                    Py_XDECREF(t); Py_DECREF(sq); Py_DECREF(mq); Py_DECREF(gq); Py_DECREF(fr);
                    return NULL;
                }
                Py_DECREF(t);
            }
        return Py_BuildValue("(NNNN)", sq, mq, gq, fr);
    }
    case R_LFRU: {
        PyObject *pr = list_keys(S, PRIV(c)), *un = valued_keys(S, c, UNPRIV(c));
        if (!pr || !un) { Py_XDECREF(pr); Py_XDECREF(un); return NULL; }
        return Py_BuildValue("(NNLLdL)", pr, un, c->tick, c->clock, c->decay, c->interval);
    }
    case R_SEG: {
        PyObject *a = st_dump(S, c->sub[0]), *b = a ? st_dump(S, c->sub[1]) : NULL;
        if (!b) { Py_XDECREF(a); return NULL; }
        return Py_BuildValue("(NN)", a, b);
    }
    case R_CRF: case R_CLASSLRU: {
        PyObject *table = crf_table(S, c);
        if (!table) return NULL;
        if (c->rule == R_CRF) {
            PyObject *res = PyList_New(c->hn);
            if (!res) { Py_DECREF(table); return NULL; }
            for (long i = 0; i < c->hn; i++) {
                int k = c->heap[i];
                PyObject *t = Py_BuildValue("(iL)", k, S->ht[k]);
                if (!t) { Py_DECREF(table); Py_DECREF(res); return NULL; }
                PyList_SET_ITEM(res, i, t);
            }
            return Py_BuildValue("(NNLLd)", table, res, c->now, c->tick, c->h);
        }
        PyObject *lists = PyList_New(8);
        long nst = st_len(S, c), j = 0;
        int *order = malloc(sizeof(int) * (nst ? nst : 1));
        if (!lists || !order) { Py_DECREF(table); Py_XDECREF(lists); free(order); return PyErr_NoMemory(); }
        for (int cl = 0; cl <= 7; cl++) {
            PyObject *l = list_keys(S, CLS(c, cl));
            if (!l) { Py_DECREF(table); Py_DECREF(lists); free(order); return NULL; }
            PyList_SET_ITEM(lists, cl, l);
            for (int k = S->lh[CLS(c, cl)]; k >= 0; k = S->nxt[k]) order[j++] = k;
        }
        for (long a = 1; a < nst; a++) {        /* by admission (insertion sort: a cache's keys) */
            int x = order[a];
            long q = a;
            while (q > 0 && S->hf[order[q - 1]] > S->hf[x]) { order[q] = order[q - 1]; q--; }
            order[q] = x;
        }
        PyObject *stamps = PyList_New(nst);
        for (long a = 0; stamps && a < nst; a++) {
            PyObject *t = Py_BuildValue("(iL)", order[a], S->ht[order[a]]);
            if (!t) { Py_CLEAR(stamps); break; }
            PyList_SET_ITEM(stamps, a, t);
        }
        free(order);
        if (!stamps) { Py_DECREF(table); Py_DECREF(lists); return NULL; }
        return Py_BuildValue("(NNNLd)", table, lists, stamps, c->now, c->h);
    }
    case R_VLFRU: {
        PyObject *ents = PyList_New(S->ln[c->lbase]);
        if (!ents) return NULL;
        long i = 0;
        for (int k = S->lh[c->lbase]; k >= 0; k = S->nxt[k], i++) {
            PyObject *t = Py_BuildValue("(iLL)", k, (long long)S->hf[k], S->ht[k]);
            if (!t) { Py_DECREF(ents); return NULL; }
            PyList_SET_ITEM(ents, i, t);
        }
        return Py_BuildValue("(NL)", ents, c->tick);
    }
    case R_FAR: {
        PyObject *layers = PyList_New(0);
        if (!layers) return NULL;
        for (int j = 0; j < c->fspan; j++) {
            int l = c->fbase + j;
            if (!S->ln[l]) continue;
            PyObject *keys = list_keys(S, l);
            long layer = c->fspan == 1 ? c->klo / c->E : j;
            PyObject *t = keys ? Py_BuildValue("(lN)", layer, keys) : NULL;
            if (!t || PyList_Append(layers, t) < 0) { Py_XDECREF(t); Py_DECREF(layers); return NULL; }
            Py_DECREF(t);
        }
        return Py_BuildValue("(Nl)", layers, c->cur);
    }
    }
    PyErr_SetString(PyExc_ValueError, "_fast: a store it does not know");
    return NULL;
}

/* ---------------------------------------------------------------- set-up */
typedef struct {
    double decay, alpha, thr;
    long long interval;
    long W, L, E, K, heap_cap;
    const long long *lacc;   /* per layer its accesses in the replay (NULL: W each) */
    double h;                /* crf, classlru: the CRF half-life (steps) */
} Params;

static int cache_init(Cache *c, int rule, long cap, int lbase, const Params *P, int side_a,
                      int side_b) {
    c->rule = rule; c->cap = cap; c->lbase = lbase;
    c->inc = 1.0; c->decay = P->decay; c->interval = P->interval; c->alpha = P->alpha;
    c->s_limit = 0.1 * (double)cap;
    c->m_limit = (double)cap - c->s_limit;
    { double g = 0.9 * (double)cap; long gi = (long)g; c->g_cap = gi > 1 ? gi : 1; }
    c->u_cap = cap / 3;
    c->p_cap = cap - c->u_cap;
    c->a_cap = cap - cap / 3;
    c->E = P->E;
    c->thr = P->thr;
    c->W = P->W;
    c->h = P->h;
    if (rule == R_LFU || rule == R_SCORE || rule == R_CRF) {
        c->heap = malloc(sizeof(int) * P->heap_cap);
        if (!c->heap) return -1;
    }
    if (rule == R_FT) {
        c->wL = P->L;
        c->wr = calloc(P->L, sizeof(int *));
        c->wroom = calloc(P->L, sizeof(long));
        c->whead = calloc(P->L, sizeof(long));
        c->wlen = calloc(P->L, sizeof(long));
        c->cnt = calloc(P->K, sizeof(int));
        if (!c->wr || !c->wroom || !c->whead || !c->wlen || !c->cnt) return -1;
        for (long l = 0; P->lacc && l < P->L; l++) {       /* a replay: room for what it holds */
            if (ft_reserve(c, l, P->lacc[l] < P->W ? (long)P->lacc[l] : P->W) < 0) return -1;
        }
    }
    if (rule == R_SEG) {
        for (int j = 0; j < 2; j++) {
            c->sub[j] = calloc(1, sizeof(Cache));
            if (!c->sub[j]) return -1;
            if (cache_init(c->sub[j], j ? side_b : side_a, cap, lbase + 2 * j, P, 0, 0) < 0)
                return -1;
        }
    }
    return 0;
}

/* the lists each cache has (lbase: LISTS_PER_CACHE of them), and after them one list per
 * layer for a shared farthest_layer cache */
#define LISTS_PER_CACHE 8
static inline long lists_needed(long ncaches, long L) { return ncaches * LISTS_PER_CACHE + L; }

/* cache i's place: its lists, its keys, farthest_layer's per-layer lists */
static void cache_layout(Cache *c, long i, long ncaches, int per_layer, long L, long E) {
    c->klo = per_layer ? i * E : 0;
    c->khi = per_layer ? (i + 1) * E : L * E;
    c->fbase = per_layer ? c->lbase : (int)(ncaches * LISTS_PER_CACHE);
    c->fspan = per_layer ? 1 : (int)L;
}

static void cache_free(Cache *c) {
    if (c->wr) for (long l = 0; l < c->wL; l++) free(c->wr[l]);
    free(c->heap); free(c->wr); free(c->wroom); free(c->whead); free(c->wlen); free(c->cnt);
    for (int j = 0; j < 2; j++)
        if (c->sub[j]) { cache_free(c->sub[j]); free(c->sub[j]); }
}

/* ---------------------------------------------------------------- buffers */
typedef struct { Py_buffer b; int held; } Buf;

static int get_buf(PyObject *o, Buf *x, Py_ssize_t itemsize, Py_ssize_t min_len, const char *what) {
    x->held = 0;
    if (o == Py_None) return 0;
    if (PyObject_GetBuffer(o, &x->b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    x->held = 1;
    if (x->b.itemsize != itemsize || x->b.len / itemsize < min_len) {
        PyErr_Format(PyExc_ValueError, "_fast.replay: %s has items of %zd bytes and %zd items "
                     "(need %zd-byte items, at least %zd)", what, x->b.itemsize,
                     x->b.len / (x->b.itemsize ? x->b.itemsize : 1), itemsize, min_len);
        return -1;
    }
    return 0;
}

static void rel_buf(Buf *x) { if (x->held) PyBuffer_Release(&x->b); x->held = 0; }

/* get_buf for a buffer the call cannot do without (None: TypeError naming it) */
static int get_req_buf(PyObject *o, Buf *x, Py_ssize_t itemsize, Py_ssize_t min_len, const char *what) {
    x->held = 0;
    if (o == Py_None) {
        PyErr_Format(PyExc_TypeError, "_fast: %s must be a buffer, not None", what);
        return -1;
    }
    return get_buf(o, x, itemsize, min_len, what);
}

/* ---------------------------------------------------------------- steps and tokens */
typedef struct { long long step; int tokens; } StepTok;

static int steptok_cmp(const void *a, const void *b) {
    long long x = ((const StepTok *)a)->step, y = ((const StepTok *)b)->step;
    return (x > y) - (x < y);
}

/* steps_tokens(steps, tokens): mpl.trace.steps_and_tokens over a pack's arrays (int64 steps,
 * -1 for None; int32 tokens per record): (distinct steps, the sum over steps of their widest
 * record). Steps in order (a recorded or synthetic trace) are one pass; any other order is
 * sorted first. */
static PyObject *fast_steps_tokens(PyObject *self, PyObject *args) {
    PyObject *so, *to;
    if (!PyArg_ParseTuple(args, "OO", &so, &to)) return NULL;
    Buf sb, tb;
    if (get_req_buf(so, &sb, 8, 0, "steps") < 0) { rel_buf(&sb); return NULL; }
    Py_ssize_t n = sb.b.len / 8;
    if (get_req_buf(to, &tb, 4, n, "tokens") < 0) { rel_buf(&sb); rel_buf(&tb); return NULL; }
    const long long *st = sb.b.buf;
    const int *tk = tb.b.buf;
    long long distinct = 0, total = 0;
    int sorted = 1;
    for (Py_ssize_t i = 1; i < n; i++)
        if (st[i] < st[i - 1]) { sorted = 0; break; }
    StepTok *v = NULL;
    if (!sorted) {
        if ((size_t)n > SIZE_MAX / sizeof(StepTok)) { rel_buf(&sb); rel_buf(&tb); return PyErr_NoMemory(); }
        v = malloc(sizeof(StepTok) * (size_t)(n ? n : 1));
        if (!v) { rel_buf(&sb); rel_buf(&tb); return PyErr_NoMemory(); }
        for (Py_ssize_t i = 0; i < n; i++) { v[i].step = st[i]; v[i].tokens = tk[i]; }
        qsort(v, (size_t)n, sizeof(StepTok), steptok_cmp);
    }
    for (Py_ssize_t i = 0; i < n;) {
        long long s = v ? v[i].step : st[i];
        int w = 0;
        for (; i < n && (v ? v[i].step : st[i]) == s; i++) {
            int t = v ? v[i].tokens : tk[i];
            if (t > w) w = t;
        }
        distinct++;
        total += w;
    }
    free(v);
    rel_buf(&sb); rel_buf(&tb);
    return Py_BuildValue("(LL)", distinct, total);
}

/* ---------------------------------------------------------------- replay */
static const char *replay_doc =
"replay(cfg, caps, pins, layers, offs, experts, weights, steps, tokens, comp, dense, clocks)\n"
"Run the packed records through the caches; see mpl/runtime/fast.py (the only caller).";

static PyObject *fast_replay(PyObject *self, PyObject *args) {
    PyObject *cfg, *caps_o, *pins_o, *o_layers, *o_offs, *o_exp, *o_w, *o_steps, *o_tok, *o_comp,
        *o_dense, *clocks_o, *o_rec = Py_None;
    if (!PyArg_ParseTuple(args, "O!O!OOOOOOOOOO!|O", &PyTuple_Type, &cfg, &PyList_Type, &caps_o,
                          &pins_o, &o_layers, &o_offs, &o_exp, &o_w, &o_steps, &o_tok, &o_comp,
                          &o_dense, &PyTuple_Type, &clocks_o, &o_rec))
        return NULL;
    int rule, per_layer, priority;
    long L, E, pool_size;
    long long cur_step, last_layer;
    double decay, alpha, wdef, rstall;
    long long interval;
    int protect;      /* 0: no in-use protection (a test-only mode, for the libCacheSim oracle) */
    long long rebalance, dispatches;   /* per-layer: uniform rebalance every n dispatches */
    long long ttl_n, accesses;         /* ttl_n < 0: no TTL */
    int ttl_steps;
    double mem_thr, mem_headroom, mem_budget, expert_bytes;   /* mem_thr < 0: no trigger */
    int side_a, side_b;                /* segmented: the sides' rules */
    double ft_thr;
    long ft_window;
    int mode;                          /* 0 gpu_only, 1 cpu_fallback, 2 hybrid */
    double cpu_limit;                  /* hybrid: the CPU iff tokens < cpu_limit */
    double half_life;                  /* crf, classlru */
    if (!PyArg_ParseTuple(cfg, "ippllldLddLLdpLLLpLddddiidlidd", &rule, &per_layer, &priority, &L,
                          &E, &pool_size, &decay, &interval, &alpha, &wdef, &cur_step,
                          &last_layer, &rstall, &protect, &rebalance, &dispatches, &ttl_n,
                          &ttl_steps, &accesses, &mem_thr, &mem_headroom, &mem_budget,
                          &expert_bytes, &side_a, &side_b, &ft_thr, &ft_window, &mode, &cpu_limit,
                          &half_life))
        return NULL;
    double dense1, gpu1, txf, now, link, tl_stall, tl_gpu, tl_xfer, cpu1, tl_cpu, tl_cpu_wait;
    int wait_all;
    if (!PyArg_ParseTuple(clocks_o, "dddpdddddddd", &dense1, &gpu1, &txf, &wait_all, &now, &link,
                          &tl_stall, &tl_gpu, &tl_xfer, &cpu1, &tl_cpu, &tl_cpu_wait))
        return NULL;
    int basic_a = side_a == R_LRU || side_a == R_LFU || side_a == R_SCORE || side_a == R_FT;
    int basic_b = side_b == R_LRU || side_b == R_LFU || side_b == R_SCORE || side_b == R_FT;
    if (rule < 0 || rule > R_LAST || L < 1 || E < 1 || L > (1L << 26) || E > (1L << 26) || !(half_life > 0.0) ||
        L * E > (1L << 26) || ft_window < 1 || mode < 0 || mode > 2 || ttl_n < -1 || rebalance < 0 ||
        (rule == R_SEG && (!basic_a || !basic_b))) {
        PyErr_SetString(PyExc_ValueError, "_fast.replay: bad configuration");
        return NULL;
    }
    long K = L * E;
    if (pool_size < 0 || pool_size > K) {
        PyErr_SetString(PyExc_ValueError, "_fast.replay: a slot pool larger than the keys");
        return NULL;
    }
    long ncaches = per_layer ? L : 1;
    if (PyList_GET_SIZE(caps_o) != ncaches) {
        PyErr_SetString(PyExc_ValueError, "_fast.replay: one capacity per cache");
        return NULL;
    }
    /* the capacities now, as exact ints (no Python code runs to read them) */
    for (long i = 0; i < ncaches; i++)
        if (!PyLong_CheckExact(PyList_GET_ITEM(caps_o, i))) {
            PyErr_SetString(PyExc_TypeError, "_fast.replay: a capacity that is not an int");
            return NULL;
        }
    Buf bl, bo, be, bw, bs, bt, bc, bd, bp, ro, rv, rsl, bcc;
    Buf *all[] = {&bl, &bo, &be, &bw, &bs, &bt, &bc, &bd, &bp, &ro, &rv, &rsl, &bcc};
    for (int i = 0; i < 13; i++) memset(all[i], 0, sizeof(Buf));
    PyObject *result = NULL;
    State S;
    memset(&S, 0, sizeof S);
    Cache *C = NULL;
    unsigned char *pinned = NULL;
    unsigned char *outc = NULL;
    long long *l_acc = NULL, *l_hit = NULL, *lacc_n = NULL;
    int *ordbuf = NULL, *bgl = NULL, *evl = NULL;
    double *arrival = NULL;   /* key -> landing time of its background load, < 0: none */
    long narrival = 0;
    double *lready = NULL, *lcomp = NULL;

    if (get_req_buf(o_layers, &bl, 4, 0, "layers") < 0) goto done;
    Py_ssize_t D = bl.b.len / 4;
    if (get_req_buf(o_offs, &bo, 4, D + 1, "offs") < 0) goto done;
    const int *layers = bl.b.buf, *offs = bo.b.buf;
    Py_ssize_t A = offs[D];
    if (offs[0] != 0 || A < 0) { PyErr_SetString(PyExc_ValueError, "_fast.replay: bad offsets"); goto done; }
    if (get_req_buf(o_exp, &be, 4, A, "experts") < 0) goto done;
    if (get_buf(o_w, &bw, 8, A, "weights") < 0) goto done;
    if (get_req_buf(o_steps, &bs, 8, D, "steps") < 0) goto done;
    if (get_req_buf(o_tok, &bt, 4, D, "tokens") < 0) goto done;
    PyObject *o_comp_gpu = o_comp, *o_comp_cpu = Py_None;
    if (PyTuple_Check(o_comp)) {        /* (gpu costs, cpu costs) per access */
        if (!PyArg_ParseTuple(o_comp, "OO", &o_comp_gpu, &o_comp_cpu)) goto done;
    }
    if (get_buf(o_comp_gpu, &bc, 8, A, "comp") < 0) goto done;
    if (get_buf(o_comp_cpu, &bcc, 8, A, "comp_cpu") < 0) goto done;
    if (get_buf(o_dense, &bd, 8, D, "dense") < 0) goto done;
    if (get_buf(pins_o, &bp, 1, E, "pins") < 0) goto done;
    /* optional decision record, per access: outcome (1 hit, 2 load, 0 stream), victim key
     * (-1 none) and slot (-1 streamed) */
    signed char *rec_out = NULL;
    int *rec_victim = NULL, *rec_slot = NULL;
    if (o_rec != Py_None) {
        PyObject *x0, *x1, *x2;
        if (!PyArg_ParseTuple(o_rec, "OOO", &x0, &x1, &x2)) goto done;
        if (get_buf(x0, &ro, 1, A, "record outcomes") < 0 || get_buf(x1, &rv, 4, A, "record victims") < 0 ||
            get_buf(x2, &rsl, 4, A, "record slots") < 0)
            goto done;
        if (!ro.held || !rv.held || !rsl.held || ro.b.readonly || rv.b.readonly || rsl.b.readonly) {
            PyErr_SetString(PyExc_ValueError, "_fast.replay: the decision record needs writable buffers");
            goto done;
        }
        rec_out = ro.b.buf; rec_victim = rv.b.buf; rec_slot = rsl.b.buf;
    }
    const int *experts = be.b.buf, *tokens = bt.b.buf;
    const double *weights = bw.held ? bw.b.buf : NULL;
    const long long *steps = bs.b.buf;
    const double *comp = bc.held ? bc.b.buf : NULL, *rdense = bd.held ? bd.b.buf : NULL;
    const double *comp_cpu = bcc.held ? bcc.b.buf : NULL;
    pinned = calloc(E, 1);
    if (!pinned) { PyErr_NoMemory(); goto done; }
    if (bp.held) memcpy(pinned, bp.b.buf, E);
    /* validate the records once (a bad pack is a bug of the caller, never a crash); count
     * each layer's accesses (what a frequency_threshold window can ever hold) */
    lacc_n = calloc(L, sizeof(long long));
    if (!lacc_n) { PyErr_NoMemory(); goto done; }
    long maxn = 1;
    for (Py_ssize_t r = 0; r < D; r++) {
        if (layers[r] < 0 || layers[r] >= L || offs[r] < 0 || offs[r] > offs[r + 1] || offs[r + 1] > A ||
            (tokens[r] > 1 && (!comp || !rdense || (mode && !comp_cpu)))) {
            PyErr_Format(PyExc_ValueError, "_fast.replay: bad record %zd", r);
            goto done;
        }
        if (offs[r + 1] - offs[r] > maxn) maxn = offs[r + 1] - offs[r];
        lacc_n[layers[r]] += offs[r + 1] - offs[r];
    }
    for (Py_ssize_t a = 0; a < A; a++)
        if (experts[a] < 0 || experts[a] >= E) {
            PyErr_Format(PyExc_ValueError, "_fast.replay: bad expert id at %zd", a);
            goto done;
        }

    /* state */
    S.K = K;
    long nl = lists_needed(ncaches, L);
    S.slot = malloc(sizeof(int) * K); S.lid = malloc(sizeof(int) * K);
    S.prv = malloc(sizeof(int) * K); S.nxt = malloc(sizeof(int) * K);
    S.pos = malloc(sizeof(int) * K); S.hf = calloc(K, sizeof(double));
    S.ht = calloc(K, sizeof(long long)); S.freq = calloc(K, 1);
    S.mark = calloc(K, sizeof(long long));
    S.lh = malloc(sizeof(int) * nl); S.lt = malloc(sizeof(int) * nl);
    S.ln = calloc(nl, sizeof(long));
    /* (crf's window search walks a heap of up to every key) */
    S.frontier = malloc(sizeof(int) * (maxn + (rule == R_CRF ? K : E) + 4));
    if (rule == R_CRF || rule == R_CLASSLRU) {
        S.kcrf = malloc(sizeof(double) * K);
        S.klast = malloc(sizeof(long long) * K);
        if (!S.kcrf || !S.klast) { PyErr_NoMemory(); goto done; }
        for (long k = 0; k < K; k++) S.klast[k] = -1;
    }
    C = calloc(ncaches, sizeof(Cache));
    outc = malloc(maxn);
    l_acc = calloc(L, sizeof(long long)); l_hit = calloc(L, sizeof(long long));
    S.tprv = malloc(sizeof(int) * K); S.tnxt = malloc(sizeof(int) * K);
    S.tstamp = calloc(K, sizeof(long long)); S.tin = calloc(K, 1);
    S.side = calloc(K, 1);
    S.fstack = malloc(sizeof(int) * (pool_size > 0 ? pool_size : 1));
    S.thead = S.ttail = -1;
    ordbuf = malloc(sizeof(int) * maxn);
    bgl = malloc(sizeof(int) * maxn);
    evl = malloc(sizeof(int) * (K + maxn + 1));
    arrival = malloc(sizeof(double) * K);
    lready = malloc(sizeof(double) * maxn); lcomp = malloc(sizeof(double) * maxn);
    if (!S.slot || !S.lid || !S.prv || !S.nxt || !S.pos || !S.hf || !S.ht || !S.freq || !S.mark ||
        !S.lh || !S.lt || !S.ln || !S.frontier || !C || !outc || !l_acc || !l_hit ||
        !ordbuf || !lready || !lcomp || !S.tprv || !S.tnxt || !S.tstamp || !S.tin || !S.fstack ||
        !S.side || !bgl || !evl || !arrival) {
        PyErr_NoMemory();
        goto done;
    }
    for (long k = 0; k < K; k++) { S.slot[k] = -1; S.lid[k] = -1; S.pos[k] = -1; arrival[k] = -1.0; }
    S.ftop = 0;
    for (long i = pool_size - 1; i >= 0; i--) S.fstack[S.ftop++] = (int)i;   /* SlotPool() */
    for (long l = 0; l < nl; l++) { S.lh[l] = S.lt[l] = -1; }
    Params P = {decay, alpha, ft_thr, interval, ft_window, L, E, K, per_layer ? E : K, lacc_n, half_life};
    for (long i = 0; i < ncaches; i++) {
        Cache *c = &C[i];
        long cap = PyLong_AsLong(PyList_GET_ITEM(caps_o, i));
        if (cap == -1 && PyErr_Occurred()) goto done;
        if (cap < 1) { PyErr_SetString(PyExc_ValueError, "_fast.replay: capacity < 1"); goto done; }
        if (cache_init(c, rule, cap, (int)(i * LISTS_PER_CACHE), &P, side_a, side_b) < 0) { PyErr_NoMemory(); goto done; }
        cache_layout(c, i, ncaches, per_layer, L, E);
    }

    long long demand = 0, streamed = 0, evictions = 0, nx = 0, background = 0, cpu_computes = 0;
    const int link_bound = txf >= gpu1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < D; r++) {
        long layer = layers[r];
        long long st = steps[r];
        if (st < 0) { if (layer <= last_layer) cur_step++; }
        else cur_step = st;
        last_layer = layer;
        int a0 = offs[r], n = offs[r + 1] - a0;
        Cache *c = per_layer ? &C[layer] : &C[0];
        st_begin(c, cur_step, layer);
        long base = layer * E;
        S.stamp++;
        if (protect)
            for (int j = 0; j < n; j++) S.mark[base + experts[a0 + j]] = S.stamp;
        /* processing order: router order, or heaviest first with priority routing */
        int *ord = NULL;
        if (priority && weights && n > 1) {
            ord = ordbuf;
            for (int j = 0; j < n; j++) {
                int x = j, q = j;
                double wx = weights[a0 + j];
                while (q > 0 && weights[a0 + ord[q - 1]] < wx) { ord[q] = ord[q - 1]; q--; }
                ord[q] = x;
            }
        }
        long hits = 0, nd = 0, nst = 0, nbg = 0, ncpu = 0, nev = 0;
        const int to_cpu = mode == 1 || (mode == 2 && (double)tokens[r] < cpu_limit);
        for (int jj = 0; jj < n; jj++) {
            int j = ord ? ord[jj] : jj;
            int e = experts[a0 + j];
            int k = (int)(base + e);
            double w = weights ? weights[a0 + j] : wdef;
            accesses++;
            if (S.slot[k] >= 0) {
                hits++;
                if (ttl_n >= 0 && !pinned[e]) t_touch(&S, k, ttl_steps ? cur_step : accesses);
                outc[j] = 1;
                if (rec_out) { rec_out[a0 + j] = 1; rec_victim[a0 + j] = -1; rec_slot[a0 + j] = S.slot[k]; }
                if (!pinned[e]) st_hit(&S, c, k, w);
                continue;
            }
            /* a miss: computed from a transfer (gpu_only, or hybrid over the limit: a demand
             * load, else a stream), or on the CPU with a background load if one is admitted */
            outc[j] = to_cpu ? 3 : 0;
            if (to_cpu) ncpu++;
            if (!pinned[e]) st_miss(&S, c, k);
            int slot;
            if (!st_admits(c, k)) goto not_admitted;     /* frequency_threshold's filter */
            if (c->nres >= c->cap || S.ftop == 0) {
                int v = st_evict(&S, c, k);
                if (v < 0) goto not_admitted;
                if (rec_out) rec_victim[a0 + j] = v;
                slot = S.slot[v];
                S.slot[v] = -1;
                c->nres--;
                evictions++;
                evl[nev++] = v;
                t_unlink(&S, v);
            } else {
                slot = S.fstack[--S.ftop];
                if (rec_out) rec_victim[a0 + j] = -1;
            }
            if (rec_out) { rec_out[a0 + j] = to_cpu ? 3 : 2; rec_slot[a0 + j] = slot; }
            S.slot[k] = slot;
            c->nres++;
            if (!pinned[e]) {
                st_insert(&S, c, k, w);
                if (ttl_n >= 0) t_touch(&S, k, ttl_steps ? cur_step : accesses);
            }
            if (to_cpu) bgl[nbg++] = k;
            else nd++;
            continue;
        not_admitted:
            if (!to_cpu) nst++;
            if (rec_out) { rec_out[a0 + j] = to_cpu ? 4 : 0; rec_victim[a0 + j] = -1; rec_slot[a0 + j] = -1; }
        }
        background += nbg;
        cpu_computes += ncpu;
        demand += nd;
        streamed += nst;
        l_acc[layer] += n;
        l_hit[layer] += hits;
        if (ttl_n >= 0) {                /* Runtime._ttl_sweep: expired keys not in use */
            long long limit = (ttl_steps ? cur_step : accesses) - ttl_n;
            int k = S.thead;
            while (k >= 0 && S.tstamp[k] <= limit) {
                int nxt = S.tnxt[k];
                if (!excluded(&S, k)) {
                    Cache *ck = per_layer ? &C[k / E] : &C[0];
                    S.fstack[S.ftop++] = S.slot[k];
                    S.slot[k] = -1;
                    ck->nres--;
                    st_discard(&S, ck, k);
                    t_unlink(&S, k);
                    evictions++;
                    evl[nev++] = k;
                }
                k = nxt;
            }
        }
        if (mem_thr >= 0 && (double)(pool_size - S.ftop) * expert_bytes >= mem_thr * mem_budget) {
            /* Runtime._pressure: evict down to the headroom, from the cache with the most
             * evictable residents (ties: the lower layer), else any other */
            double target = mem_headroom * mem_budget;
            while ((double)(pool_size - S.ftop) * expert_bytes > target) {
                Cache *best = NULL;
                for (long i = 0; i < ncaches; i++) {
                    long nn = st_len(&S, &C[i]);
                    if (nn && (!best || nn > st_len(&S, best))) best = &C[i];
                }
                if (!best) break;
                int v = st_evict(&S, best, -1);
                Cache *from = best;
                if (v < 0) {
                    for (long i = 0; i < ncaches && v < 0; i++) {
                        if (&C[i] == best || !st_len(&S, &C[i])) continue;
                        v = st_evict(&S, &C[i], -1);
                        from = &C[i];
                    }
                }
                if (v < 0) break;
                S.fstack[S.ftop++] = S.slot[v];
                S.slot[v] = -1;
                from->nres--;
                t_unlink(&S, v);
                evictions++;
                evl[nev++] = v;
            }
        }
        long m = nd + nst;
        double stall;
        if (tokens[r] <= 1 && narrival == 0 && ncpu == 0) {   /* Timeline.demand's formula */
            double t0 = now + dense1;
            double busy = n * gpu1;
            double t = t0 + busy;
            if (m) {
                double s0 = t0 > link ? t0 : link;
                link = s0 + m * txf;
                double last;
                if (wait_all) last = link + busy;
                else if (link_bound) last = link + gpu1;
                else last = s0 + txf + m * gpu1;
                if (last > t) t = last;
                nx += m;
                tl_xfer += m * txf;
            }
            stall = t - t0 - busy;
            tl_gpu += busy + dense1;
            tl_stall += stall;
            now = t;
        } else {                         /* Timeline.dispatch's general path */
            const int one = tokens[r] <= 1;
            double dense = one ? dense1 : rdense[r];
            double t0 = now + dense;
            double early = 0.0, busy, t, cpu_busy = 0.0;
            long nlate = 0, nxr = 0;
            int unsorted = 0;
            for (int j = 0; j < n; j++) {   /* router order, as the Plan lists the experts */
                int k = (int)(base + experts[a0 + j]);
                if (outc[j] >= 3) {         /* on the CPU */
                    cpu_busy += one ? cpu1 : comp_cpu[a0 + j];
                    continue;
                }
                double cp = one ? gpu1 : comp[a0 + j];
                double ready;
                if (outc[j] == 1) ready = (narrival && arrival[k] >= 0.0) ? arrival[k] : 0.0;
                else if (narrival == 0 || arrival[k] < 0.0) {   /* a demand load or a stream */
                    link = (t0 > link ? t0 : link) + txf;
                    nxr++;
                    ready = link;
                } else ready = arrival[k];  /* a miss already in flight */
                if (ready <= t0) early += cp;
                else {
                    if (nlate && ready < lready[nlate - 1]) unsorted = 1;
                    lready[nlate] = ready; lcomp[nlate] = cp; nlate++;
                }
            }
            for (long q = 0; q < nbg; q++) {   /* background loads start with the dispatch */
                link = (t0 > link ? t0 : link) + txf;
                nxr++;
                if (arrival[bgl[q]] < 0.0) narrival++;
                arrival[bgl[q]] = link;
            }
            busy = early;
            if (!nlate) t = t0 + early;
            else if (!wait_all) {
                if (unsorted) {             /* late.sort(): by (ready, compute) */
                    for (long i = 1; i < nlate; i++) {
                        double rx = lready[i], cx = lcomp[i];
                        long q = i;
                        while (q > 0 && (rx < lready[q - 1] || (rx == lready[q - 1] && cx < lcomp[q - 1]))) {
                            lready[q] = lready[q - 1]; lcomp[q] = lcomp[q - 1]; q--;
                        }
                        lready[q] = rx; lcomp[q] = cx;
                    }
                }
                t = t0 + early;
                for (long q = 0; q < nlate; q++) {
                    if (lready[q] > t) t = lready[q];
                    t += lcomp[q];
                    busy += lcomp[q];
                }
            } else {
                double last = lready[0], sum = 0.0;
                for (long q = 0; q < nlate; q++) {
                    if (lready[q] > last) last = lready[q];
                    sum += lcomp[q];
                }
                busy += sum;
                t = last + busy;
            }
            stall = t - t0 - busy;
            double cpu_end = t0 + cpu_busy;
            double end = t >= cpu_end ? t : cpu_end;
            if (cpu_busy != 0.0) {
                tl_cpu_wait += end - t;
                tl_cpu += cpu_busy;
            }
            tl_gpu += busy + dense;
            tl_stall += stall;
            if (narrival) {
                for (long q = 0; q < nev; q++)
                    if (arrival[evl[q]] >= 0.0) { arrival[evl[q]] = -1.0; narrival--; }
                if (narrival > 4096) {      /* forget transfers that have long landed */
                    for (long k = 0; k < K; k++)
                        if (arrival[k] >= 0.0 && !(arrival[k] > end)) { arrival[k] = -1.0; narrival--; }
                }
            }
            if (nxr) {
                nx += nxr;
                tl_xfer += nxr * txf;
            }
            now = end;
        }
        if (stall > 0) rstall += stall;
        if (rebalance > 0 && ++dispatches % rebalance == 0) {
            /* a uniform rebalance gives every cache its capacity again: Cache.set_capacity
             * -> Store.resize (ARC trims its ghost lists to the capacity) */
            for (long i = 0; i < ncaches; i++) st_resize(&S, &C[i], C[i].cap);
        }
    }
    Py_END_ALLOW_THREADS

    /* results */
    {
        PyObject *pla = PyList_New(L), *plh = PyList_New(L), *res = PyList_New(ncaches);
        if (!pla || !plh || !res) { Py_XDECREF(pla); Py_XDECREF(plh); Py_XDECREF(res); goto done; }
        for (long i = 0; i < L; i++) {
            PyList_SET_ITEM(pla, i, PyLong_FromLongLong(l_acc[i]));
            PyList_SET_ITEM(plh, i, PyLong_FromLongLong(l_hit[i]));
        }
        int fail = 0;
        for (long i = 0; i < ncaches; i++) {
            /* (the store's state as its class dumps it, all residents as (key, slot)) */
            PyObject *ks = st_dump(&S, &C[i]);
            PyObject *rs = PyList_New(0);
            if (!ks || !rs) { Py_XDECREF(ks); Py_XDECREF(rs); fail = 1; break; }
            long lo = per_layer ? i * E : 0, hi = per_layer ? (i + 1) * E : K;
            for (long k = lo; k < hi && !fail; k++) {
                if (S.slot[k] < 0) continue;
                PyObject *pair = Py_BuildValue("(li)", k, S.slot[k]);
                if (!pair || PyList_Append(rs, pair) < 0) fail = 1;
                Py_XDECREF(pair);
            }
            PyObject *ct = Py_BuildValue("(NN)", ks, rs);
            if (!ct) { fail = 1; break; }
            PyList_SET_ITEM(res, i, ct);
        }
        if (fail || PyErr_Occurred()) { Py_DECREF(pla); Py_DECREF(plh); Py_DECREF(res); goto done; }
        PyObject *fl = PyList_New(S.ftop);
        if (!fl) { Py_DECREF(pla); Py_DECREF(plh); Py_DECREF(res); goto done; }
        for (long i = 0; i < S.ftop; i++) PyList_SET_ITEM(fl, i, PyLong_FromLong(S.fstack[i]));
        if (PyErr_Occurred()) { Py_DECREF(fl); Py_DECREF(pla); Py_DECREF(plh); Py_DECREF(res); goto done; }
        PyObject *tl_o = PyList_New(0);       /* the TTL order: (key, stamp), oldest first */
        if (!tl_o) { Py_DECREF(fl); Py_DECREF(pla); Py_DECREF(plh); Py_DECREF(res); goto done; }
        for (int k = S.thead; k >= 0; k = S.tnxt[k]) {
            PyObject *pair = Py_BuildValue("(iL)", k, S.tstamp[k]);
            if (!pair || PyList_Append(tl_o, pair) < 0) fail = 1;
            Py_XDECREF(pair);
            if (fail) break;
        }
        if (fail) { Py_DECREF(tl_o); Py_DECREF(fl); Py_DECREF(pla); Py_DECREF(plh); Py_DECREF(res); goto done; }
        PyObject *arr = PyDict_New();
        if (!arr) { Py_DECREF(tl_o); Py_DECREF(fl); Py_DECREF(pla); Py_DECREF(plh); Py_DECREF(res); goto done; }
        for (long k = 0; k < K && narrival; k++) {
            if (arrival[k] < 0.0) continue;
            PyObject *kk = PyLong_FromLong(k), *vv = PyFloat_FromDouble(arrival[k]);
            if (!kk || !vv || PyDict_SetItem(arr, kk, vv) < 0) fail = 1;
            Py_XDECREF(kk); Py_XDECREF(vv);
            if (fail) break;
        }
        if (fail) { Py_DECREF(arr); Py_DECREF(tl_o); Py_DECREF(fl); Py_DECREF(pla); Py_DECREF(plh); Py_DECREF(res); goto done; }
        result = Py_BuildValue("{s:N,s:N,s:L,s:L,s:L,s:d,s:L,s:L,s:N,s:N,s:(ddddd),s:L,s:N,"
                               "s:L,s:L,s:d,s:d,s:N}",
                               "l_acc", pla, "l_hit", plh, "demand_loads", demand,
                               "streamed", streamed, "evictions", evictions, "stall", rstall,
                               "step", cur_step, "last_layer", last_layer, "free", fl,
                               "caches", res, "clocks", now, link, tl_stall, tl_gpu, tl_xfer,
                               "accesses", accesses, "ttl", tl_o,
                               "background_loads", background, "cpu_computes", cpu_computes,
                               "cpu_ms", tl_cpu, "cpu_wait_ms", tl_cpu_wait, "arrival", arr);
        if (result) {
            PyObject *v = PyLong_FromLongLong(nx);
            if (!v || PyDict_SetItemString(result, "transfers", v) < 0) Py_CLEAR(result);
            Py_XDECREF(v);
        }
    }

done:
    for (int i = 0; i < 13; i++) rel_buf(all[i]);
    free(S.slot); free(S.lid); free(S.prv); free(S.nxt); free(S.pos); free(S.hf); free(S.ht);
    free(S.freq); free(S.mark); free(S.lh); free(S.lt); free(S.ln); free(S.frontier);
    free(S.tprv); free(S.tnxt); free(S.tstamp); free(S.tin); free(S.fstack); free(S.side);
    free(S.kcrf); free(S.klast);
    if (C) for (long i = 0; i < ncaches; i++) cache_free(&C[i]);
    free(C); free(pinned); free(outc); free(l_acc); free(l_hit); free(lacc_n);
    free(ordbuf); free(lready); free(lcomp); free(bgl); free(evl); free(arrival);
    return result;
}

/* ------------------------------------------------------------------ live dispatch
 * dispatch() in C: _fast.LiveState (mpl/runtime/_live.c), the runtime's dispatch state held
 * in the kernel's structures above. */
static PyObject *s_kw_weights, *s_kw_tokens, *s_kw_predictions, *s_step;

/* The arguments of a dispatch call as the fast paths take them (the generated dispatch's
 * cheap checks): exact ints and a list of distinct exact ints in range, weights None or a
 * list of floats with a finite sum, tokens an int >= 1, step None or an int >= 0,
 * predictions None or a dict (non-empty ones only where the caller takes them: with_preds),
 * positionally or as the mechanism's keywords. 1: taken; 0:
 * anything else (the caller hands the call to the pure dispatch, before any state change). */
typedef struct {
    PyObject *layer_o, *experts, *weights, *tokens_o, *step_o;
    PyObject *preds;           /* non-empty predictions (borrowed; NULL: none) */
    long layer;
    Py_ssize_t n;
    long long step_given;      /* -1: step=None */
    long tokens;
    int has_w;                 /* the weights were given: copied into wv */
} Args;

/* ex and wv (room for cap values each) receive copies of the ids and the weights: the
 * caller's lists may change under any later call into Python, the copies cannot */
static int parse_args(PyObject *const *args, size_t nargsf, PyObject *kw, long num_layers,
                      long num_experts, long *ex, double *wv, Py_ssize_t cap, int with_preds, Args *A) {
    A->preds = NULL;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 2 || nargs > 4) return 0;
    PyObject *layer_o = args[0], *experts = args[1];
    PyObject *weights = nargs > 2 ? args[2] : Py_None;
    PyObject *tokens_o = nargs > 3 ? args[3] : NULL, *step_o = Py_None;
    if (kw) {   /* weights=, tokens=, step=, predictions= (empty or None); anything else: pure */
        Py_ssize_t nk = PyTuple_GET_SIZE(kw);
        for (Py_ssize_t i = 0; i < nk; i++) {
            PyObject *name = PyTuple_GET_ITEM(kw, i), *v = args[nargs + i];
            if (PyUnicode_Compare(name, s_kw_weights) == 0 && nargs < 3) weights = v;
            else if (PyUnicode_Compare(name, s_kw_tokens) == 0 && nargs < 4) tokens_o = v;
            else if (PyUnicode_Compare(name, s_step) == 0) step_o = v;
            else if (PyUnicode_Compare(name, s_kw_predictions) == 0) {
                if (v == Py_None || (PyDict_CheckExact(v) && PyDict_GET_SIZE(v) == 0)) continue;
                if (!with_preds || !PyDict_CheckExact(v)) return 0;
                A->preds = v;
            }
            else { PyErr_Clear(); return 0; }
        }
    }
    A->step_given = -1;
    if (step_o != Py_None) {
        if (!PyLong_CheckExact(step_o)) return 0;
        int sov;
        A->step_given = PyLong_AsLongLongAndOverflow(step_o, &sov);
        if (sov || A->step_given < 0) { PyErr_Clear(); return 0; }
    }
    if (!PyLong_CheckExact(layer_o) || !PyList_CheckExact(experts)) return 0;
    int ovf;
    long layer = PyLong_AsLongAndOverflow(layer_o, &ovf);
    if (ovf || layer < 0 || layer >= num_layers) { PyErr_Clear(); return 0; }
    Py_ssize_t n = PyList_GET_SIZE(experts);
    if (n > cap) return 0;
    unsigned char *seen = NULL;
    if (n > 64 && !(seen = calloc(num_experts, 1))) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *e = PyList_GET_ITEM(experts, i);
        long v = PyLong_CheckExact(e) ? PyLong_AsLongAndOverflow(e, &ovf) : -1;
        if (!PyLong_CheckExact(e) || ovf || v < 0 || v >= num_experts) { PyErr_Clear(); free(seen); return 0; }
        if (seen) {
            if (seen[v]) { free(seen); return 0; }
            seen[v] = 1;
        } else {
            for (Py_ssize_t j = 0; j < i; j++) if (ex[j] == v) return 0;
        }
        ex[i] = v;
    }
    free(seen);
    A->has_w = weights != Py_None;
    if (A->has_w) {
        if (!PyList_CheckExact(weights) || PyList_GET_SIZE(weights) != n) return 0;
        double s = 0.0;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *w = PyList_GET_ITEM(weights, i);
            if (!PyFloat_CheckExact(w)) return 0;
            wv[i] = PyFloat_AS_DOUBLE(w);
            s += wv[i];
        }
        if (s * 0.0 != 0.0) return 0;
    }
    A->tokens = 1;
    if (tokens_o) {
        PyObject *t = tokens_o;
        if (!PyLong_CheckExact(t)) return 0;
        long tv = PyLong_AsLongAndOverflow(t, &ovf);
        if (!ovf && tv == -1 && PyErr_Occurred()) PyErr_Clear();
        if (ovf < 0 || (!ovf && tv < 1)) return 0;
        A->tokens = ovf > 0 ? LONG_MAX : tv;
    }
    A->layer_o = layer_o; A->experts = experts; A->weights = weights; A->tokens_o = tokens_o;
    A->step_o = step_o; A->layer = layer; A->n = n;
    return 1;
}

static const char *plan_slots[8] = {"step", "layer", "experts", "where", "hit", "raw_loads", "evicted", "_typed"};

/* ---------------------------------------------------------------- packing dispatches */
/* pack_dispatches(dispatches, num_experts): fast.pack_dispatches in C for the common
 * shapes (each dispatch's layer and step exact ints, its experts a list of lists of exact
 * ints, its weights None or lists of exact floats of the same shape); None for anything
 * else (the Python packer takes it, with its errors). Returns (layers, offs, experts,
 * weights or None, steps, tokens, multi, weights_mixed): the arrays as bytes, multi a list
 * of (record index, {expert: tokens}). The same distinct experts (first occurrence, router
 * order), the same mean weights (summed in order, then divided) as mpl.runtime.routing. */
typedef struct { char *p; Py_ssize_t n, cap; } GrowBuf;

static int gb_put(GrowBuf *b, const void *x, Py_ssize_t size) {
    if (b->n + size > b->cap) {
        Py_ssize_t nc = b->cap ? b->cap : 4096;
        while (nc < b->n + size) {
            if (nc > PY_SSIZE_T_MAX / 2) { PyErr_NoMemory(); return -1; }
            nc *= 2;
        }
        char *np = realloc(b->p, (size_t)nc);
        if (!np) { PyErr_NoMemory(); return -1; }
        b->p = np; b->cap = nc;
    }
    memcpy(b->p + b->n, x, (size_t)size);
    b->n += size;
    return 0;
}

static PyObject *gb_bytes(GrowBuf *b) { return PyBytes_FromStringAndSize(b->p ? b->p : "", b->n); }

static PyObject *s_layer_a, *s_step_a, *s_experts_a, *s_weights_a;

/* an exact int in [lo, hi) into *out; 0: not one (the Python packer decides) */
static int exact_int(PyObject *v, long lo, long hi, long *out) {
    if (!PyLong_CheckExact(v)) return 0;
    int of = 0;
    long x = PyLong_AsLongAndOverflow(v, &of);
    if (of || x < lo || x >= hi) { PyErr_Clear(); return 0; }
    *out = x;
    return 1;
}

/* the offset of a slot member ``name`` of type t (an object slot), -1 when it is not one */
static Py_ssize_t slot_offset(PyTypeObject *t, PyObject *name) {
    PyObject *desc = _PyType_Lookup(t, name);      /* borrowed */
    if (!desc || Py_TYPE(desc) != &PyMemberDescr_Type) return -1;
    PyMemberDef *m = ((PyMemberDescrObject *)desc)->d_member;
    return m->type == T_OBJECT_EX && !(m->flags & READONLY) ? m->offset : -1;
}

/* d.<name> as a new reference: read at its slot when d is of the type the offsets are for */
static inline PyObject *dispatch_field(PyObject *d, PyTypeObject *t, Py_ssize_t off, PyObject *name) {
    if (Py_TYPE(d) == t && off >= 0) {
        PyObject *v = *(PyObject **)((char *)d + off);
        Py_XINCREF(v);
        if (!v) PyErr_SetObject(PyExc_AttributeError, name);
        return v;
    }
    return PyObject_GetAttr(d, name);
}

static PyObject *fast_pack_dispatches(PyObject *self, PyObject *args) {
    PyObject *seq_o;
    long E;
    if (!PyArg_ParseTuple(args, "Ol", &seq_o, &E)) return NULL;
    if (E < 1 || E > INT_MAX) { PyErr_SetString(PyExc_ValueError, "_fast.pack_dispatches: num_experts out of range"); return NULL; }
    /* a tuple: the sequence cannot change under the loop; the objects are held by it */
    PyObject *seq = PySequence_Tuple(seq_o);
    if (!seq) return NULL;
    GrowBuf bl = {0}, bo = {0}, be = {0}, bw = {0}, bs = {0}, bt = {0};
    PyObject *multi = PyList_New(0), *result = NULL;
    int *seen = calloc((size_t)E, sizeof(int));     /* expert -> 1 + its index in the dispatch, this round */
    int *rowbuf = NULL;
    double *wsum = NULL;
    long *wcnt = NULL;
    Py_ssize_t rcap = 0;
    long long with_w = 0, without_w = 0;
    int bad_range = 0, ok = 1;
    if (!multi || !seen) { PyErr_NoMemory(); goto done; }
    int zero = 0;
    if (gb_put(&bo, &zero, 4) < 0) goto done;
    long long off = 0;
    Py_ssize_t nd = PyTuple_GET_SIZE(seq);
    if (nd > INT_MAX) { ok = 0; goto fallback; }
    /* the type of the first dispatch (mpl.trace.Dispatch: a slots dataclass) and its
     * fields' slots, read directly for every dispatch of that type */
    PyTypeObject *dt = nd ? Py_TYPE(PyTuple_GET_ITEM(seq, 0)) : NULL;
    Py_ssize_t o_layer = -1, o_step = -1, o_exp = -1, o_w = -1;
    if (dt) {
        o_layer = slot_offset(dt, s_layer_a); o_step = slot_offset(dt, s_step_a);
        o_exp = slot_offset(dt, s_experts_a); o_w = slot_offset(dt, s_weights_a);
    }
    for (Py_ssize_t r = 0; r < nd && ok; r++) {
        PyObject *d = PyTuple_GET_ITEM(seq, r);
        PyObject *lo = dispatch_field(d, dt, o_layer, s_layer_a);
        PyObject *so = lo ? dispatch_field(d, dt, o_step, s_step_a) : NULL;
        PyObject *xo = so ? dispatch_field(d, dt, o_exp, s_experts_a) : NULL;
        PyObject *wo = xo ? dispatch_field(d, dt, o_w, s_weights_a) : NULL;
        if (!wo) { Py_XDECREF(lo); Py_XDECREF(so); Py_XDECREF(xo); PyErr_Clear(); ok = 0; break; }
        long layer = 0;
        int good = exact_int(lo, 0, INT_MAX, &layer) && PyLong_CheckExact(so) && PyList_CheckExact(xo) &&
                   (wo == Py_None || PyList_CheckExact(wo));
        long long step = 0;
        if (good) {
            int of = 0;
            step = PyLong_AsLongLongAndOverflow(so, &of);
            if (of) { PyErr_Clear(); good = 0; }
        }
        Py_ssize_t tokens = good ? PyList_GET_SIZE(xo) : 0;
        if (good && wo != Py_None && PyList_GET_SIZE(wo) != tokens) good = 0;
        /* tokens_of of a several-token dispatch; made before the rows are measured: from
         * here to the next dispatch nothing allocates a collectable object, so no finalizer
         * can change the lists this reads */
        PyObject *tok = NULL;
        if (good && tokens > 1 && !(tok = PyDict_New())) {
            Py_DECREF(lo); Py_DECREF(so); Py_DECREF(xo); Py_DECREF(wo);
            goto done;
        }
        /* the rows (held by the lists, which nothing changes while this loop runs: no Python
         * code runs after the attribute reads) */
        Py_ssize_t total = 0;
        for (Py_ssize_t t = 0; good && t < tokens; t++) {
            PyObject *row = PyList_GET_ITEM(xo, t);
            if (!PyList_CheckExact(row)) { good = 0; break; }
            if (wo != Py_None) {
                PyObject *wr = PyList_GET_ITEM(wo, t);
                if (!PyList_CheckExact(wr) || PyList_GET_SIZE(wr) != PyList_GET_SIZE(row)) { good = 0; break; }
            }
            total += PyList_GET_SIZE(row);
        }
        if (good && total > rcap) {
            Py_ssize_t nc = total > 64 ? total : 64;
            int *nr = realloc(rowbuf, sizeof(int) * nc);
            double *nw = nr ? realloc(wsum, sizeof(double) * nc) : NULL;
            long *nn = nw ? realloc(wcnt, sizeof(long) * nc) : NULL;
            if (nr) rowbuf = nr;
            if (nw) wsum = nw;
            if (!nn) { Py_DECREF(lo); Py_DECREF(so); Py_DECREF(xo); Py_DECREF(wo); Py_XDECREF(tok); PyErr_NoMemory(); goto done; }
            wcnt = nn;
            rcap = nc;
        }
        Py_ssize_t n = 0;
        for (Py_ssize_t t = 0; good && t < tokens; t++) {
            PyObject *row = PyList_GET_ITEM(xo, t), *wr = wo != Py_None ? PyList_GET_ITEM(wo, t) : NULL;
            Py_ssize_t m = PyList_GET_SIZE(row);
            for (Py_ssize_t j = 0; j < m; j++) {
                PyObject *eo = PyList_GET_ITEM(row, j);
                long e;
                if (!PyLong_CheckExact(eo)) { good = 0; break; }
                int of = 0;
                e = PyLong_AsLongAndOverflow(eo, &of);
                if (of) { PyErr_Clear(); good = 0; break; }
                double w = 0.0;
                if (wr) {
                    PyObject *x = PyList_GET_ITEM(wr, j);
                    if (!PyFloat_CheckExact(x)) { good = 0; break; }
                    w = PyFloat_AS_DOUBLE(x);
                }
                if (e < 0 || e >= E) { bad_range = 1; good = 0; break; }
                int at = seen[e];
                if (!at) {
                    seen[e] = (int)(n + 1);
                    rowbuf[n] = (int)e; wsum[n] = w; wcnt[n] = 1;
                    n++;
                } else { wsum[at - 1] += w; wcnt[at - 1]++; }
            }
            if (good && tok) {   /* tokens_of: per expert, the tokens that chose it (set(row)) */
                for (Py_ssize_t j = 0; j < m; j++) {
                    PyObject *eo = PyList_GET_ITEM(row, j);
                    int dup = 0;
                    for (Py_ssize_t q = 0; q < j; q++)
                        if (PyLong_AsLong(PyList_GET_ITEM(row, q)) == PyLong_AsLong(eo)) { dup = 1; break; }
                    if (dup) continue;
                    PyObject *c = PyDict_GetItemWithError(tok, eo);
                    long cv = c ? PyLong_AsLong(c) + 1 : 1;
                    if (!c && PyErr_Occurred()) { good = 0; ok = -1; break; }
                    PyObject *cn = PyLong_FromLong(cv);
                    if (!cn || PyDict_SetItem(tok, eo, cn) < 0) { Py_XDECREF(cn); good = 0; ok = -1; break; }
                    Py_DECREF(cn);
                }
            }
        }
        for (Py_ssize_t j = 0; j < n; j++) seen[rowbuf[j]] = 0;
        int has_w = wo != Py_None;
        Py_DECREF(lo); Py_DECREF(so); Py_DECREF(xo); Py_DECREF(wo);
        if (ok < 0) { Py_XDECREF(tok); goto done; }
        if (!good) { Py_XDECREF(tok); ok = 0; break; }
        int iv = (int)layer, nt = tokens == 1 ? 1 : (int)tokens;
        if (tokens != 1 && tokens > INT_MAX) { Py_XDECREF(tok); ok = 0; break; }
        off += n;
        if (off > INT_MAX) { Py_XDECREF(tok); ok = 0; break; }
        int offv = (int)off;
        if (gb_put(&bl, &iv, 4) < 0 || gb_put(&bo, &offv, 4) < 0 || gb_put(&bs, &step, 8) < 0 ||
                gb_put(&bt, &nt, 4) < 0) { Py_XDECREF(tok); goto done; }
        if (gb_put(&be, rowbuf, (Py_ssize_t)sizeof(int) * n) < 0) { Py_XDECREF(tok); goto done; }
        if (has_w) {
            with_w++;
            for (Py_ssize_t j = 0; j < n; j++) {
                double mw = wcnt[j] == 1 ? wsum[j] : wsum[j] / (double)wcnt[j];
                if (gb_put(&bw, &mw, 8) < 0) { Py_XDECREF(tok); goto done; }
            }
        } else without_w++;
        if (tok) {
            PyObject *pair = Py_BuildValue("(nN)", r, tok);
            if (!pair || PyList_Append(multi, pair) < 0) { Py_XDECREF(pair); goto done; }
            Py_DECREF(pair);
        }
    }
fallback:
    if (bad_range) {
        PyErr_SetString(PyExc_ValueError, "an expert id out of range in the dispatches");
        goto done;
    }
    if (!ok) { result = Py_None; Py_INCREF(result); goto done; }
    {
        PyObject *w = with_w ? gb_bytes(&bw) : (Py_INCREF(Py_None), Py_None);
        result = Py_BuildValue("(NNNNNNOO)", gb_bytes(&bl), gb_bytes(&bo), gb_bytes(&be), w, gb_bytes(&bs),
                               gb_bytes(&bt), multi, (with_w && without_w) ? Py_True : Py_False);
    }
done:
    Py_DECREF(seq);
    Py_XDECREF(multi);
    free(bl.p); free(bo.p); free(be.p); free(bw.p); free(bs.p); free(bt.p);
    free(seen); free(rowbuf); free(wsum); free(wcnt);
    return result;
}

#include "_guard.c"

#include "_learned.c"     /* (before _live.c: LiveState calls the predictor's cores) */

#include "_live.c"

#include "_belady.c"

#include "_jsonl.c"

static PyMethodDef methods[] = {
    {"replay", fast_replay, METH_VARARGS, NULL},
    {"belady", fast_belady, METH_VARARGS, belady_doc},
    {"steps_tokens", fast_steps_tokens, METH_VARARGS,
     "steps_tokens(steps, tokens): mpl.trace.steps_and_tokens over a pack's arrays"},
    {"pack_dispatches", fast_pack_dispatches, METH_VARARGS,
     "pack_dispatches(dispatches, num_experts): fast.pack_dispatches's arrays as bytes (None: not taken)"},
    {"jsonl_rows", fast_jsonl_rows, METH_VARARGS,
     "jsonl_rows(data, start, max_line): a JSONL trace's rows as columns (None: not taken)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "mpl.runtime._fast",
    "The compiled replay kernel of the policy runtime (see mpl/runtime/fast.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__fast(void) {
    methods[0].ml_doc = replay_doc;
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "ABI", 7)   /* = fast.KERNEL_ABI */ < 0) { Py_DECREF(m); return NULL; }
    if (m && (!(s_layer_a = PyUnicode_InternFromString("layer")) || !(s_step_a = PyUnicode_InternFromString("step")) ||
              !(s_experts_a = PyUnicode_InternFromString("experts")) ||
              !(s_weights_a = PyUnicode_InternFromString("weights")))) { Py_DECREF(m); return NULL; }
    if (m && guard_init_module(m) < 0) { Py_DECREF(m); return NULL; }
    if (m && ls_init_module(m) < 0) { Py_DECREF(m); return NULL; }
    if (m && lrn_init_module(m) < 0) { Py_DECREF(m); return NULL; }
    return m;
}
