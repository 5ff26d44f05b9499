/* weighted_sum(a = w, b = w, ...): a memory tier's eviction rule (mpl/runtime/eviction_weighted.py,
 * class WeightedSum). Every named rule (a single-queue rule, ST_SIDE) keeps its own store over
 * the same resident keys and sees every hit, miss, insert and discard. A key's rank under a
 * rule is its place in that store's keys() (coldest first) over n - 1 (n residents); the
 * victim is the evictable key with the lowest weighted rank sum, ties to the key the first
 * rule ranks colder; keys() is that order. The sum is made as the class makes it: per rule,
 * in the order named, 0.0 + w * rank * norm, then += (the same operations, the same
 * rounding). The rules' admission filters do not apply, and no rule is clocked (WeightedSum
 * has neither flag); needs_miss is any rule's (each reads misses where it does). A victim
 * search reads every rule's order into scratch arrays made at construction: no op allocates. */
#include "store_impl.h"

#define WS_MAX 8

typedef struct {
    Store base;
    int n;
    Store *part[WS_MAX];
    double w[WS_MAX];
    unsigned char *res;      /* per index: resident */
    long nres;
    int *buf;                /* a rule's keys() (scratch) */
    double *score;           /* per index: the weighted rank sum (scratch) */
    long *first;             /* per index: the first rule's rank (scratch) */
} WStore;

/* WeightedSum._scores: every resident key's sum and first rank; buf then holds every key */
static long ws_scores(const WStore *o) {
    const Store *s = &o->base;
    long n = o->nres, m = 0;
    double norm = n > 1 ? 1.0 / (double)(n - 1) : 0.0;
    for (int j = 0; j < o->n; j++) {
        m = o->part[j]->ops->keys(o->part[j], o->buf);
        for (long r = 0; r < m; r++) {
            int i = o->buf[r] - s->klo;
            double add = o->w[j] * (double)r * norm;
            if (j == 0) {
                o->score[i] = 0.0 + add;
                o->first[i] = r;
            } else o->score[i] += add;
        }
    }
    return m;
}

static int ws_less(const Store *s, int x, int y) {
    const WStore *o = (const WStore *)s;
    return o->score[x] < o->score[y] || (o->score[x] == o->score[y] && o->first[x] < o->first[y]);
}

static void ws_fini(Store *s) {
    WStore *o = (WStore *)s;
    for (int j = 0; j < o->n; j++) store_free(o->part[j]);
    free(o->res); free(o->buf); free(o->score); free(o->first);
}

static int ws_prepare(Store *s, long layer, long n) {
    WStore *o = (WStore *)s;
    for (int j = 0; j < o->n; j++) {
        Store *p = o->part[j];
        if (p->ops->prepare && p->ops->prepare(p, layer, n) < 0) return -1;
    }
    return 0;
}

static void ws_hit(Store *s, int k, double w) {
    WStore *o = (WStore *)s;
    for (int j = 0; j < o->n; j++) o->part[j]->ops->hit(o->part[j], k, w);
}

static void ws_miss(Store *s, int k, double w) {
    WStore *o = (WStore *)s;
    for (int j = 0; j < o->n; j++)
        if (o->part[j]->flags & ST_NEEDS_MISS) o->part[j]->ops->miss(o->part[j], k, w);
}

static void ws_insert(Store *s, int k, double w) {
    WStore *o = (WStore *)s;
    o->res[k - s->klo] = 1;
    o->nres++;
    for (int j = 0; j < o->n; j++) o->part[j]->ops->insert(o->part[j], k, w);
}

static void ws_discard(Store *s, int k) {
    WStore *o = (WStore *)s;
    if (!o->res[k - s->klo]) return;
    o->res[k - s->klo] = 0;
    o->nres--;
    for (int j = 0; j < o->n; j++) o->part[j]->ops->discard(o->part[j], k);
}

static int ws_evict(Store *s, const Exclude *x, int incoming) {
    (void)incoming;
    WStore *o = (WStore *)s;
    long m = ws_scores(o);
    int best = -1;
    for (long r = 0; r < m; r++) {
        int k = o->buf[r];
        if (ex_has(x, k)) continue;
        if (best < 0 || ws_less(s, k - s->klo, best - s->klo)) best = k;
    }
    if (best >= 0) ws_discard(s, best);
    return best;
}

static long ws_len(const Store *s) { return ((const WStore *)s)->nres; }

static long ws_keys(const Store *s, int *out) {
    const WStore *o = (const WStore *)s;
    long m = ws_scores(o);
    for (long r = 0; r < m; r++) out[r] = o->buf[r] - s->klo;
    return idx_keys(out, m, ws_less, s);
}

static void ws_resize(Store *s, long cap) {
    WStore *o = (WStore *)s;
    s->cap = cap;
    for (int j = 0; j < o->n; j++) o->part[j]->ops->resize(o->part[j], cap);
}

static void ws_set_param(Store *s, int param, double v) {
    WStore *o = (WStore *)s;
    for (int j = 0; j < o->n; j++) o->part[j]->ops->set_param(o->part[j], param, v);
}

static const StoreOps store_weighted_ops = {
    .name = "weighted_sum", .flags = 0, .size = sizeof(WStore),
    .init = NULL, .fini = ws_fini, .begin = NULL, .prepare = ws_prepare,
    .hit = ws_hit, .miss = ws_miss, .admits = NULL, .evict = ws_evict,
    .insert = ws_insert, .discard = ws_discard, .len = ws_len, .keys = ws_keys,
    .resize = ws_resize, .set_param = ws_set_param,
};

int weighted_make(Store **out, Store *const *parts, const double *w, int n) {
    WStore *o = n >= 2 && n <= WS_MAX ? calloc(1, sizeof(WStore)) : NULL;
    int nk = n >= 1 ? st_n(parts[0]) : 0;
    if (o && (!(o->res = st_zalloc((size_t)nk, 1)) || !(o->buf = st_zalloc((size_t)nk, sizeof(int))) ||
              !(o->score = st_zalloc((size_t)nk, sizeof(double))) ||
              !(o->first = st_zalloc((size_t)nk, sizeof(long))))) {
        free(o->res); free(o->buf); free(o->score);
        free(o);
        o = NULL;
    }
    if (!o) {
        for (int j = 0; j < n; j++) store_free(parts[j]);
        return -1;
    }
    o->base = *parts[0];                      /* its capacity, keys and shape */
    o->base.ops = &store_weighted_ops;
    o->base.flags = 0;
    o->n = n;
    for (int j = 0; j < n; j++) {
        o->part[j] = parts[j];
        o->w[j] = w[j];
        o->base.flags |= parts[j]->flags & (ST_NEEDS_MISS | ST_LAYERED);
    }
    *out = &o->base;
    return 0;
}
