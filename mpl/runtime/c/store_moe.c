/* The rules of MoE serving engines (mpl/runtime/eviction_moe.py, where their sources and the
 * decisions the engines leave open are stated): crf and classlru (llama.cpp's expert cache),
 * vllm_lfru (vLLM's expert cache) and farthest_layer (layer order, for a shared cache).
 *
 * crf and classlru keep per key a CRF (combined recency and frequency) and the step of its
 * last use, for every key ever used, resident or not (the class _CRFTable): at each step that
 * uses a key, crf = crf * 2^((last - now) / H) + 1 (H: cache.crf_half_life steps). Steps are
 * any int64: differences of steps are taken exactly and rounded once, as Python rounds the
 * int it divides by H. Where a step goes back (a caller's explicit steps may) by more than
 * about 1024 H, 2^x overflows to inf (Python's _pow2 alike): the CRF a use stores is then the
 * largest finite double, so that it never becomes inf, nor NaN when it decays again (inf * 0),
 * and its class stays defined. */
#include <float.h>
#include <math.h>

#include "store_impl.h"

/* ---------------------------------------------------------------- the CRF table */
typedef struct {
    double *crf;             /* per index: its CRF at its last use */
    int64_t *last;           /* per index: the step of its last use */
    unsigned char *used;     /* per index: it has a row (it was used once) */
    double h;                /* cache.crf_half_life, in steps */
} CRFTable;

static int table_init(CRFTable *t, int n, double h) {
    t->h = h;
    t->crf = st_zalloc(n, sizeof(double));
    t->last = st_zalloc(n, sizeof(int64_t));
    t->used = st_zalloc(n, 1);
    return t->crf && t->last && t->used ? 0 : -1;
}

static void table_fini(CRFTable *t) { free(t->crf); free(t->last); free(t->used); }

/* _CRFTable.use: a use of index i at step now -> its CRF (one per step counts) */
static double table_use(CRFTable *t, int i, int64_t now) {
    double v;
    if (!t->used[i]) v = 1.0;
    else if (t->last[i] == now) return t->crf[i];
    else v = t->crf[i] * pow(2.0, i64_diff(t->last[i], now) / t->h) + 1.0;
    if (v > DBL_MAX) v = DBL_MAX;        /* (saturated: see the top of this file) */
    t->crf[i] = v;
    t->last[i] = now;
    t->used[i] = 1;
    return v;
}

/* _CRFTable.value: the CRF decayed to step now (0 for a key never used) */
static inline double table_value(const CRFTable *t, int i, int64_t now) {
    if (!t->used[i]) return 0.0;
    return t->crf[i] * pow(2.0, i64_diff(t->last[i], now) / t->h);
}

/* the last use as CRF's entries and orders carry it: -1 for a key never used */
static inline int64_t table_last_or(const CRFTable *t, int i) {
    return t->used[i] ? t->last[i] : -1;
}

/* ---------------------------------------------------------------- crf */
/* The residents sit in a heap on (g, last use, load order), g = log2(CRF at its last use) +
 * last / H (-inf for a key never used): between two uses every key's CRF decays by the same
 * factor, so the order of g is the order of the decayed values. The victim is decided on the
 * decayed values themselves, among the residents not excluded whose g is within 1e-9 of the
 * least such g: the lowest (decayed CRF, last use, load order). A prefetch arrival is not a
 * use. */
typedef struct {
    Store base;
    CRFTable t;
    IHeap h;
    double *g;               /* per resident index: its heap value */
    long long *seq;          /* per resident index: its load order */
    long long nseq;
    int64_t now;
} CRFStore;

static inline int crf_less(const CRFStore *o, int a, int b) {
    if (o->g[a] != o->g[b]) return o->g[a] < o->g[b];
    int64_t la = table_last_or(&o->t, a), lb = table_last_or(&o->t, b);
    if (la != lb) return la < lb;
    return o->seq[a] < o->seq[b];
}

#define CRF_LESS(o, a, b) crf_less((o), (a), (b))
IHEAP_DEFINE(ch, CRFStore, CRF_LESS)

/* CRF._entry's value for index i, from its table row */
static inline double crf_g(const CRFStore *o, int i) {
    if (!o->t.used[i]) return -INFINITY;
    return log2(o->t.crf[i]) + (double)o->t.last[i] / o->t.h;
}

static int crf_init(Store *s, const double *params) {
    CRFStore *o = (CRFStore *)s;
    int n = st_n(s);
    o->g = st_zalloc(n, sizeof(double));
    o->seq = st_zalloc(n, sizeof(long long));
    if (!o->g || !o->seq || table_init(&o->t, n, params[SP_CRF_HALF_LIFE]) < 0) return -1;
    return iheap_init(&o->h, n);
}

static void crf_fini(Store *s) {
    CRFStore *o = (CRFStore *)s;
    table_fini(&o->t);
    iheap_fini(&o->h);
    free(o->g);
    free(o->seq);
}

static void crf_begin(Store *s, int64_t step, long layer) {
    (void)layer;
    ((CRFStore *)s)->now = step;
}

/* CRF._rebuild: every resident's value again (the half-life changed) */
static void crf_set_param(Store *s, int param, double v) {
    CRFStore *o = (CRFStore *)s;
    if (param != SP_CRF_HALF_LIFE) return;
    o->t.h = v;
    for (long j = 0; j < o->h.n; j++) o->g[o->h.a[j]] = crf_g(o, o->h.a[j]);
    ch_rebuild(o);
}

static void crf_hit(Store *s, int k, double w) {
    (void)w;
    CRFStore *o = (CRFStore *)s;
    int i = k - s->klo;
    table_use(&o->t, i, o->now);
    o->g[i] = crf_g(o, i);
    ch_down(o, o->h.pos[i]);
    ch_up(o, o->h.pos[i]);
}

static void crf_miss(Store *s, int k, double w) {
    (void)w;
    CRFStore *o = (CRFStore *)s;
    table_use(&o->t, k - s->klo, o->now);
}

static void crf_insert(Store *s, int k, double w) {
    (void)w;
    CRFStore *o = (CRFStore *)s;
    int i = k - s->klo;
    o->seq[i] = ++o->nseq;
    o->g[i] = crf_g(o, i);
    ch_push(o, i);
}

static void crf_discard(Store *s, int k) {
    CRFStore *o = (CRFStore *)s;
    int p = o->h.pos[k - s->klo];
    if (p >= 0) ch_remove_at(o, p);
}

/* CRF._order: (decayed CRF, last use, load order) */
static inline int crf_order_less(const CRFStore *o, int a, double va, int b, double vb) {
    if (va != vb) return va < vb;
    int64_t la = table_last_or(&o->t, a), lb = table_last_or(&o->t, b);
    if (la != lb) return la < lb;
    return o->seq[a] < o->seq[b];
}

/* CRF.evict: no heap node below one past the limit can be in the window (g only grows down
 * the heap), so the window is a depth-first walk from the root (the frontier array is its
 * stack: it never holds more than the residents) */
static int crf_evict(Store *s, const Exclude *x, int incoming) {
    (void)incoming;
    CRFStore *o = (CRFStore *)s;
    long i0 = ch_first_free(o, x);
    if (i0 < 0) return -1;
    double lim = o->g[o->h.a[i0]] + 1e-9;
    int *st = o->h.fr;
    long ns = 0;
    st[ns++] = 0;
    int best = -1;
    double bv = 0.0;
    while (ns) {
        long p = st[--ns];
        int i = o->h.a[p];
        if (o->g[i] > lim) continue;
        if (!ex_has(x, s->klo + i)) {
            double v = table_value(&o->t, i, o->now);
            if (best < 0 || crf_order_less(o, i, v, best, bv)) {
                best = i;
                bv = v;
            }
        }
        if (2 * p + 1 < o->h.n) st[ns++] = (int)(2 * p + 1);
        if (2 * p + 2 < o->h.n) st[ns++] = (int)(2 * p + 2);
    }
    ch_remove_at(o, o->h.pos[best]);
    return s->klo + best;
}

static long crf_len(const Store *s) { return ((const CRFStore *)s)->h.n; }

static int crf_key_less(const Store *s, int a, int b) {
    const CRFStore *o = (const CRFStore *)s;
    return crf_order_less(o, a, table_value(&o->t, a, o->now), b, table_value(&o->t, b, o->now));
}

static long crf_keys(const Store *s, int *out) {
    const CRFStore *o = (const CRFStore *)s;
    long n = o->h.n;
    for (long j = 0; j < n; j++) out[j] = o->h.a[j];
    return idx_keys(out, n, crf_key_less, s);
}

const StoreOps store_crf_ops = {
    .name = "crf", .flags = ST_NEEDS_MISS | ST_CLOCKED, .size = sizeof(CRFStore),
    .init = crf_init, .fini = crf_fini, .begin = crf_begin, .prepare = NULL,
    .hit = crf_hit, .miss = crf_miss, .admits = NULL, .evict = crf_evict, .insert = crf_insert,
    .discard = crf_discard, .len = crf_len, .keys = crf_keys, .resize = st_resize_plain,
    .set_param = crf_set_param,
};

/* ---------------------------------------------------------------- classlru */
/* Per class 0..7 an LRU list of the residents whose class (min(7, floor(log2 CRF)) at their
 * last use) it is; the victim, among residents not used in the current step and not
 * excluded, has the largest age / 2^class (age: steps since its last use), ties to the lower
 * class. A key loaded without a use joins the class of its last use (0 if never used), its
 * arrival step counting as its last use. */
#define MAX_CLASS 7

typedef struct {
    Store base;
    CRFTable t;
    Lists q;                 /* list c: the residents of class c, least recent first */
    int64_t *stamp;          /* per resident index: the step of its last use (or arrival) */
    long long *adm;          /* per resident index: its admission (keys()'s last tie-break) */
    long long nadm;
    int64_t now;
} ClassStore;

/* ClassLRU.class_of: floor(log2 crf) exactly, in [0, 7] */
static inline int class_of(double crf) {
    if (crf < 1.0) return 0;
    int e;
    frexp(crf, &e);
    return e - 1 < MAX_CLASS ? e - 1 : MAX_CLASS;
}

static int cls_init(Store *s, const double *params) {
    ClassStore *o = (ClassStore *)s;
    int n = st_n(s);
    o->stamp = st_zalloc(n, sizeof(int64_t));
    o->adm = st_zalloc(n, sizeof(long long));
    if (!o->stamp || !o->adm || table_init(&o->t, n, params[SP_CRF_HALF_LIFE]) < 0) return -1;
    return lists_init(&o->q, n, MAX_CLASS + 1);
}

static void cls_fini(Store *s) {
    ClassStore *o = (ClassStore *)s;
    table_fini(&o->t);
    lists_fini(&o->q);
    free(o->stamp);
    free(o->adm);
}

static void cls_begin(Store *s, int64_t step, long layer) {
    (void)layer;
    ((ClassStore *)s)->now = step;
}

static void cls_set_param(Store *s, int param, double v) {
    if (param == SP_CRF_HALF_LIFE) ((ClassStore *)s)->t.h = v;
}

/* ClassLRU._place */
static void cls_place(ClassStore *o, int i, int c) {
    if (o->q.lid[i] >= 0) l_remove(&o->q, i);
    else o->adm[i] = ++o->nadm;
    l_push(&o->q, c, i);
    o->stamp[i] = o->now;
}

static void cls_hit(Store *s, int k, double w) {
    (void)w;
    ClassStore *o = (ClassStore *)s;
    int i = k - s->klo;
    cls_place(o, i, class_of(table_use(&o->t, i, o->now)));
}

static void cls_miss(Store *s, int k, double w) {
    (void)w;
    ClassStore *o = (ClassStore *)s;
    table_use(&o->t, k - s->klo, o->now);
}

static void cls_insert(Store *s, int k, double w) {
    (void)w;
    ClassStore *o = (ClassStore *)s;
    int i = k - s->klo;
    cls_place(o, i, o->t.used[i] ? class_of(o->t.crf[i]) : 0);
}

static void cls_discard(Store *s, int k) {
    ClassStore *o = (ClassStore *)s;
    if (o->q.lid[k - s->klo] >= 0) l_remove(&o->q, k - s->klo);
}

static int cls_evict(Store *s, const Exclude *x, int incoming) {
    (void)incoming;
    ClassStore *o = (ClassStore *)s;
    int best = -1, best_c = 0;
    uint64_t best_age = 0;
    for (int c = 0; c <= MAX_CLASS; c++) {
        int cand = -1;
        for (int i = o->q.head[c]; i >= 0; i = o->q.nxt[i]) {
            if (o->stamp[i] >= o->now) break;      /* this one and every later one: this step */
            if (ex_has(x, s->klo + i)) continue;
            cand = i;
            break;
        }
        if (cand < 0) continue;
        uint64_t age = (uint64_t)o->now - (uint64_t)o->stamp[cand];   /* > 0, exact */
        if (best < 0 || u64_shl_gt(age, best_c, best_age, c)) {
            best = cand;
            best_age = age;
            best_c = c;
        }
    }
    if (best < 0) return -1;
    l_remove(&o->q, best);
    return s->klo + best;
}

static long cls_len(const Store *s) {
    const ClassStore *o = (const ClassStore *)s;
    long n = 0;
    for (int c = 0; c <= MAX_CLASS; c++) n += o->q.len[c];
    return n;
}

/* ClassLRU.keys: by (-(age) / 2^class, class), ties in admission order */
static int cls_key_less(const Store *s, int a, int b) {
    const ClassStore *o = (const ClassStore *)s;
    int ca = o->q.lid[a], cb = o->q.lid[b];
    double va = ldexp(i64_diff(o->stamp[a], o->now), -ca);
    double vb = ldexp(i64_diff(o->stamp[b], o->now), -cb);
    if (va != vb) return va < vb;
    if (ca != cb) return ca < cb;
    return o->adm[a] < o->adm[b];
}

static long cls_keys(const Store *s, int *out) {
    const ClassStore *o = (const ClassStore *)s;
    long n = 0;
    for (int c = 0; c <= MAX_CLASS; c++) n += l_keys(&o->q, c, 0, out + n);
    return idx_keys(out, n, cls_key_less, s);
}

const StoreOps store_classlru_ops = {
    .name = "classlru", .flags = ST_NEEDS_MISS | ST_CLOCKED, .size = sizeof(ClassStore),
    .init = cls_init, .fini = cls_fini, .begin = cls_begin, .prepare = NULL,
    .hit = cls_hit, .miss = cls_miss, .admits = NULL, .evict = cls_evict, .insert = cls_insert,
    .discard = cls_discard, .len = cls_len, .keys = cls_keys, .resize = st_resize_plain,
    .set_param = cls_set_param,
};

/* ---------------------------------------------------------------- vllm_lfru */
/* One clock per cache, +1 per access (a hit, or a load); score = freq / (clock - last + 1)
 * (freq: 1 at the load, +1 per hit); the lowest score not excluded is evicted, ties to the
 * earliest loaded (a scan in load order). The quotient of the two counts is Python's exactly
 * while they stay below 2^53. */
typedef struct {
    Store base;
    Lists q;                 /* one list: the residents in load order */
    long long *freq, *last, *seq;   /* per resident index; seq: its load order */
    long long clock, nseq;
} VLStore;

static int vl_init(Store *s, const double *params) {
    (void)params;
    VLStore *o = (VLStore *)s;
    int n = st_n(s);
    o->freq = st_zalloc(n, sizeof(long long));
    o->last = st_zalloc(n, sizeof(long long));
    o->seq = st_zalloc(n, sizeof(long long));
    if (!o->freq || !o->last || !o->seq) return -1;
    return lists_init(&o->q, n, 1);
}

static void vl_fini(Store *s) {
    VLStore *o = (VLStore *)s;
    lists_fini(&o->q);
    free(o->freq); free(o->last); free(o->seq);
}

static inline double vl_score(const VLStore *o, int i) {
    return (double)o->freq[i] / (double)(o->clock - o->last[i] + 1);
}

static void vl_hit(Store *s, int k, double w) {
    (void)w;
    VLStore *o = (VLStore *)s;
    int i = k - s->klo;
    o->clock++;
    o->freq[i]++;
    o->last[i] = o->clock;
}

static void vl_insert(Store *s, int k, double w) {
    (void)w;
    VLStore *o = (VLStore *)s;
    int i = k - s->klo;
    o->clock++;
    o->freq[i] = 1;
    o->last[i] = o->clock;
    o->seq[i] = ++o->nseq;
    l_push(&o->q, 0, i);
}

static void vl_discard(Store *s, int k) {
    VLStore *o = (VLStore *)s;
    if (o->q.lid[k - s->klo] >= 0) l_remove(&o->q, k - s->klo);
}

static int vl_evict(Store *s, const Exclude *x, int incoming) {
    (void)incoming;
    VLStore *o = (VLStore *)s;
    int best = -1;
    double bs = 0.0;
    for (int i = o->q.head[0]; i >= 0; i = o->q.nxt[i]) {
        if (ex_has(x, s->klo + i)) continue;
        double sc = vl_score(o, i);
        if (best < 0 || sc < bs) {
            best = i;
            bs = sc;
        }
    }
    if (best < 0) return -1;
    l_remove(&o->q, best);
    return s->klo + best;
}

static long vl_len(const Store *s) { return ((const VLStore *)s)->q.len[0]; }

static int vl_key_less(const Store *s, int a, int b) {
    const VLStore *o = (const VLStore *)s;
    double sa = vl_score(o, a), sb = vl_score(o, b);
    if (sa != sb) return sa < sb;
    return o->seq[a] < o->seq[b];
}

static long vl_keys(const Store *s, int *out) {
    const VLStore *o = (const VLStore *)s;
    long n = l_keys(&o->q, 0, 0, out);
    return idx_keys(out, n, vl_key_less, s);
}

const StoreOps store_vllm_lfru_ops = {
    .name = "vllm_lfru", .flags = 0, .size = sizeof(VLStore),
    .init = vl_init, .fini = vl_fini, .begin = NULL, .prepare = NULL,
    .hit = vl_hit, .miss = NULL, .admits = NULL, .evict = vl_evict, .insert = vl_insert,
    .discard = vl_discard, .len = vl_len, .keys = vl_keys, .resize = st_resize_plain,
    .set_param = st_set_param_none,
};

/* ---------------------------------------------------------------- farthest_layer */
/* Per layer an LRU list; from the layer cur the pass is at, the layers are needed again in
 * the order cur+1, cur+2, ..., (wrapping) ..., cur, so the victim is the least recent key not
 * excluded of the first layer in the order cur, cur-1, ..., then the highest down to cur+1
 * (FarthestLayer._layers: the layers <= cur downwards, then those above it downwards, which
 * also orders a cur outside the layers served). A per-layer cache has one list: LRU. */
typedef struct {
    Store base;
    Lists q;                 /* list l: the residents of layer l0 + l, least recent first */
    long l0, nl;
    long cur;
    long n;                  /* the residents */
} FarStore;

static int far_init(Store *s, const double *params) {
    (void)params;
    FarStore *o = (FarStore *)s;
    o->l0 = s->klo / s->E;
    o->nl = (s->khi - 1) / s->E + 1 - o->l0;
    return lists_init(&o->q, st_n(s), (int)o->nl);
}

static void far_fini(Store *s) { lists_fini(&((FarStore *)s)->q); }

static void far_begin(Store *s, int64_t step, long layer) {
    (void)step;
    ((FarStore *)s)->cur = layer;
}

static inline int far_list(const FarStore *o, int k) {
    return (int)(k / o->base.E - o->l0);
}

/* the j-th list in the order of victims (j in [0, nl)) */
static inline int far_nth(const FarStore *o, long j) {
    long start = o->cur >= o->l0 && o->cur < o->l0 + o->nl ? o->cur - o->l0 : o->nl - 1;
    long l = start - j;
    return (int)(l < 0 ? l + o->nl : l);
}

static void far_hit(Store *s, int k, double w) {
    (void)w;
    FarStore *o = (FarStore *)s;
    l_move_to_tail(&o->q, far_list(o, k), k - s->klo);
}

static void far_insert(Store *s, int k, double w) {
    (void)w;
    FarStore *o = (FarStore *)s;
    l_push(&o->q, far_list(o, k), k - s->klo);
    o->n++;
}

static void far_discard(Store *s, int k) {
    FarStore *o = (FarStore *)s;
    if (o->q.lid[k - s->klo] >= 0) {
        l_remove(&o->q, k - s->klo);
        o->n--;
    }
}

static int far_evict(Store *s, const Exclude *x, int incoming) {
    (void)incoming;
    FarStore *o = (FarStore *)s;
    for (long j = 0; j < o->nl; j++) {
        int i = l_first_free(&o->q, far_nth(o, j), x, s->klo);
        if (i >= 0) {
            l_remove(&o->q, i);
            o->n--;
            return s->klo + i;
        }
    }
    return -1;
}

static long far_len(const Store *s) { return ((const FarStore *)s)->n; }

static long far_keys(const Store *s, int *out) {
    const FarStore *o = (const FarStore *)s;
    long n = 0;
    for (long j = 0; j < o->nl; j++) n += l_keys(&o->q, far_nth(o, j), s->klo, out + n);
    return n;
}

const StoreOps store_farthest_layer_ops = {
    .name = "farthest_layer", .flags = ST_CLOCKED | ST_LAYERED, .size = sizeof(FarStore),
    .init = far_init, .fini = far_fini, .begin = far_begin, .prepare = NULL,
    .hit = far_hit, .miss = NULL, .admits = NULL, .evict = far_evict, .insert = far_insert,
    .discard = far_discard, .len = far_len, .keys = far_keys, .resize = st_resize_plain,
    .set_param = st_set_param_none,
};
