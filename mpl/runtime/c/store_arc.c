/* arc: the rule's struct and its hot operations are in store_arc.h. */
#include "store_arc.h"

static int arc_init(Store *s, const double *params) {
    (void)params;
    return lists_init(&((ARCStore *)s)->q, st_n(s), 4);
}

static void arc_fini(Store *s) { lists_fini(&((ARCStore *)s)->q); }

static void arc_resize(Store *s, long cap) {
    ARCStore *o = (ARCStore *)s;
    s->cap = cap;
    if (!(o->p <= (double)cap)) o->p = (double)cap;      /* min(p, float(capacity)) */
    while (o->q.len[B1] + o->q.len[B2] > cap)
        l_remove(&o->q, o->q.len[B1] ? o->q.head[B1] : o->q.head[B2]);
}

static void arc_discard(Store *s, int k) {
    ARCStore *o = (ARCStore *)s;
    int i = k - s->klo, l = o->q.lid[i];
    if (l == T1 || l == T2) l_remove(&o->q, i);
}

static long arc_len(const Store *s) {
    const ARCStore *o = (const ARCStore *)s;
    return o->q.len[T1] + o->q.len[T2];
}

static long arc_keys(const Store *s, int *out) {             /* T1 then T2 */
    const ARCStore *o = (const ARCStore *)s;
    long n = l_keys(&o->q, T1, s->klo, out);
    return n + l_keys(&o->q, T2, s->klo, out + n);
}

const StoreOps store_arc_ops = {
    .name = "arc", .flags = ST_NEEDS_MISS, .size = sizeof(ARCStore),
    .init = arc_init, .fini = arc_fini, .begin = NULL, .prepare = NULL,
    .hit = arc_hit, .miss = arc_miss, .admits = NULL, .evict = arc_evict, .insert = arc_insert,
    .discard = arc_discard, .len = arc_len, .keys = arc_keys, .resize = arc_resize,
    .set_param = st_set_param_none,
};
