/* The segmented pair "a | b" (mpl/runtime/eviction_segmented.py, class Segmented): two stores
 * of single-queue rules (ST_SIDE) over the same keys. a manages capacity - capacity // 3
 * slots, b the rest. A new key enters a; while a holds more than its share, its victim (the
 * only key spared being the one a takes in) is demoted into b without a transfer (b takes it
 * as a new key with weight 0.0). A hit in b promotes the key back into a (b forgets it; the
 * access counts in a as a miss, where a reads misses, then as a new key). Only b's victims
 * leave the cache; when b has none to give, the victim is a's. a alone sees accesses: b's hit
 * and miss are never called, so a frequency window of b stays empty.
 *
 * The pair's flags are its sides': needs_miss and filters a's (the class's miss and admits
 * are a's), clocked and layered either's (begin goes to each clocked side; prepare to a, the
 * only side that counts accesses). keys() is b's keys then a's. */
#include "store_impl.h"

typedef struct {
    Store base;
    Store *a, *b;
    unsigned char *side;     /* per index: 1 in a, 2 in b, 0 in neither */
    long a_cap;
} SegStore;

enum { IN_NONE = 0, IN_A = 1, IN_B = 2 };

/* Segmented._demote: a over its share -> its victims, sparing `protect` (-1: none), into b */
static void seg_demote(SegStore *o, int protect) {
    Store *a = o->a, *b = o->b;
    Exclude only = {NULL, 0, protect};
    while (a->ops->len(a) > o->a_cap) {
        int v = a->ops->evict(a, &only, -1);
        if (v < 0) break;
        b->ops->insert(b, v, 0.0);
        o->side[v - o->base.klo] = IN_B;
    }
}

static void seg_fini(Store *s) {
    SegStore *o = (SegStore *)s;
    if (o->a) store_free(o->a);
    if (o->b) store_free(o->b);
    free(o->side);
}

static void seg_begin(Store *s, int64_t step, long layer) {
    SegStore *o = (SegStore *)s;
    if (o->a->flags & ST_CLOCKED) o->a->ops->begin(o->a, step, layer);
    if (o->b->flags & ST_CLOCKED) o->b->ops->begin(o->b, step, layer);
}

static int seg_prepare(Store *s, long layer, long n) {
    Store *a = ((SegStore *)s)->a;
    return a->ops->prepare ? a->ops->prepare(a, layer, n) : 0;
}

static void seg_hit(Store *s, int k, double w) {
    SegStore *o = (SegStore *)s;
    Store *a = o->a;
    int i = k - s->klo;
    if (o->side[i] == IN_A) {
        a->ops->hit(a, k, w);
        return;
    }
    o->b->ops->discard(o->b, k);              /* promotion: b -> a */
    if (a->flags & ST_NEEDS_MISS) a->ops->miss(a, k, w);
    a->ops->insert(a, k, w);
    o->side[i] = IN_A;
    seg_demote(o, k);
}

static void seg_miss(Store *s, int k, double w) {
    Store *a = ((SegStore *)s)->a;
    if (a->flags & ST_NEEDS_MISS) a->ops->miss(a, k, w);
}

static int seg_admits(const Store *s, int k) {
    const Store *a = ((const SegStore *)s)->a;
    return (a->flags & ST_FILTERS) ? a->ops->admits(a, k) : 1;
}

static int seg_evict(Store *s, const Exclude *x, int incoming) {
    (void)incoming;
    SegStore *o = (SegStore *)s;
    int v = o->b->ops->evict(o->b, x, -1);
    if (v < 0) v = o->a->ops->evict(o->a, x, -1);
    if (v >= 0) o->side[v - s->klo] = IN_NONE;
    return v;
}

static void seg_insert(Store *s, int k, double w) {
    SegStore *o = (SegStore *)s;
    o->a->ops->insert(o->a, k, w);
    o->side[k - s->klo] = IN_A;
    seg_demote(o, k);
}

static void seg_discard(Store *s, int k) {
    SegStore *o = (SegStore *)s;
    unsigned char *sd = &o->side[k - s->klo];
    if (*sd == IN_A) o->a->ops->discard(o->a, k);
    else o->b->ops->discard(o->b, k);
    *sd = IN_NONE;
}

static long seg_len(const Store *s) {
    const SegStore *o = (const SegStore *)s;
    return o->a->ops->len(o->a) + o->b->ops->len(o->b);
}

static long seg_keys(const Store *s, int *out) {
    const SegStore *o = (const SegStore *)s;
    long n = o->b->ops->keys(o->b, out);
    return n + o->a->ops->keys(o->a, out + n);
}

/* Segmented.resize: the shares follow (the sides keep their own capacity, as the class's) */
static void seg_resize(Store *s, long cap) {
    SegStore *o = (SegStore *)s;
    s->cap = cap;
    o->a_cap = cap - cap / 3;
    seg_demote(o, -1);
}

static void seg_set_param(Store *s, int param, double v) {
    SegStore *o = (SegStore *)s;
    o->a->ops->set_param(o->a, param, v);
    o->b->ops->set_param(o->b, param, v);
}

static const StoreOps store_segmented_ops = {
    .name = "segmented", .flags = 0, .size = sizeof(SegStore),
    .init = NULL, .fini = seg_fini, .begin = seg_begin, .prepare = seg_prepare,
    .hit = seg_hit, .miss = seg_miss, .admits = seg_admits, .evict = seg_evict,
    .insert = seg_insert, .discard = seg_discard, .len = seg_len, .keys = seg_keys,
    .resize = seg_resize, .set_param = seg_set_param,
};

int segmented_make(Store **out, Store *a, Store *b) {
    SegStore *o = calloc(1, sizeof(SegStore));
    if (o) o->side = st_zalloc(st_n(a), 1);
    if (!o || !o->side) {
        free(o);
        store_free(a);
        store_free(b);
        return -1;
    }
    o->base = *a;                             /* its capacity, keys and shape */
    o->base.ops = &store_segmented_ops;
    o->base.flags = (a->flags & (ST_NEEDS_MISS | ST_FILTERS)) |
                    ((a->flags | b->flags) & (ST_CLOCKED | ST_LAYERED));
    o->a = a;
    o->b = b;
    o->a_cap = a->cap - a->cap / 3;
    *out = &o->base;
    return 0;
}
