/* lru: least recently used (store_lru.h holds the rule's struct and its hot operations). */
#include "store_lru.h"

static int lru_init(Store *s, const double *params) {
    (void)params;
    return lists_init(&((LRUStore *)s)->q, st_n(s), 1);
}

static void lru_fini(Store *s) { lists_fini(&((LRUStore *)s)->q); }

static void lru_discard(Store *s, int k) {
    LRUStore *o = (LRUStore *)s;
    if (o->q.lid[k - s->klo] >= 0) l_remove(&o->q, k - s->klo);
}

static long lru_len(const Store *s) { return ((const LRUStore *)s)->q.len[0]; }

static long lru_keys(const Store *s, int *out) {
    return l_keys(&((const LRUStore *)s)->q, 0, s->klo, out);
}

const StoreOps store_lru_ops = {
    .name = "lru", .flags = ST_SIDE, .size = sizeof(LRUStore),
    .init = lru_init, .fini = lru_fini, .begin = NULL, .prepare = NULL,
    .hit = lru_hit, .miss = NULL, .admits = NULL, .evict = lru_evict,
    .insert = lru_insert, .discard = lru_discard, .len = lru_len, .keys = lru_keys,
    .resize = st_resize_plain, .set_param = st_set_param_none,
};
