/* lfu and score: the rules' struct and their hot operations are in store_heap.h. */
#include "store_heap.h"

static int hs_init(Store *s, const double *params) {
    HeapStore *o = (HeapStore *)s;
    int n = st_n(s);
    o->inc = 1.0;
    o->decay = params[SP_FREQUENCY_DECAY];
    o->interval = (long long)params[SP_DECAY_INTERVAL];
    o->alpha = params[SP_SCORE_EMA_ALPHA];
    o->hf = st_zalloc(n, sizeof(double));
    o->ht = st_zalloc(n, sizeof(long long));
    if (!o->hf || !o->ht) return -1;
    return iheap_init(&o->h, n);
}

static void hs_fini(Store *s) {
    HeapStore *o = (HeapStore *)s;
    iheap_fini(&o->h);
    free(o->hf);
    free(o->ht);
}

static void lfu_set_param(Store *s, int param, double v) {
    HeapStore *o = (HeapStore *)s;
    if (param == SP_FREQUENCY_DECAY) o->decay = v;
    else if (param == SP_DECAY_INTERVAL) o->interval = (long long)v;
}

static void score_set_param(Store *s, int param, double v) {
    if (param == SP_SCORE_EMA_ALPHA) ((HeapStore *)s)->alpha = v;
}

static void hs_discard(Store *s, int k) {
    HeapStore *o = (HeapStore *)s;
    int p = o->h.pos[k - s->klo];
    if (p >= 0) hs_remove_at(o, p);
}

static long hs_len(const Store *s) { return ((const HeapStore *)s)->h.n; }

static int hs_key_less(const Store *s, int a, int b) {
    const HeapStore *o = (const HeapStore *)s;
    return HS_LESS(o, a, b);
}

/* sorted by (value, tick): LFU.keys / Score.keys */
static long hs_keys(const Store *s, int *out) {
    const HeapStore *o = (const HeapStore *)s;
    long n = o->h.n;
    for (long j = 0; j < n; j++) out[j] = o->h.a[j];
    return idx_keys(out, n, hs_key_less, s);
}

const StoreOps store_lfu_ops = {
    .name = "lfu", .flags = ST_NEEDS_MISS | ST_SIDE, .size = sizeof(HeapStore),
    .init = hs_init, .fini = hs_fini, .begin = NULL, .prepare = NULL,
    .hit = lfu_hit, .miss = lfu_miss, .admits = NULL, .evict = hs_evict, .insert = lfu_insert,
    .discard = hs_discard, .len = hs_len, .keys = hs_keys, .resize = st_resize_plain,
    .set_param = lfu_set_param,
};

const StoreOps store_score_ops = {
    .name = "score", .flags = ST_SIDE, .size = sizeof(HeapStore),
    .init = hs_init, .fini = hs_fini, .begin = NULL, .prepare = NULL,
    .hit = score_hit, .miss = NULL, .admits = NULL, .evict = hs_evict, .insert = score_insert,
    .discard = hs_discard, .len = hs_len, .keys = hs_keys, .resize = st_resize_plain,
    .set_param = score_set_param,
};
