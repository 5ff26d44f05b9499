/* least_stale: SpecMD's Least-Stale eviction, a reconstruction (mpl/runtime/
 * eviction_published.py, class LeastStale, the reference, and docs/runtime.md say what it
 * rests on). The residents sit in two FIFO queues, *current* (touched, loaded or prefetched
 * in the ongoing step) and *stale*; a new step (begin with a step other than the last one
 * seen) appends every current key to stale's tail in current's order; a hit on a stale key
 * moves it to current's tail, a hit on a current key leaves it where it is; a load or a
 * prefetch arrival enters current's tail; the victim is stale's first key not excluded, else
 * current's.
 *
 * Here the two queues are one list, stale's keys then current's, with each key's epoch (the
 * count of new steps when it was last made current): every stale key precedes every current
 * one, so stale's first key not excluded, else current's, is the list's first key not
 * excluded; and a new step, which appends current to stale, leaves the list as it is and
 * only makes its keys stale (the epoch moves on). Every operation is O(1) but the victim's
 * skip over excluded keys. */
#include "store_impl.h"

typedef struct {
    Store base;
    Lists q;                 /* one list: the stale keys, then the current ones, oldest first */
    long long *epoch;        /* per resident index: the epoch it was made current in */
    long long ep;            /* the epoch: 0 before the first begin, +1 at each new step */
    int64_t step;            /* the step of the last begin (when ep > 0) */
} LSStore;

static int ls_init(Store *s, const double *params) {
    (void)params;
    LSStore *o = (LSStore *)s;
    o->epoch = st_zalloc(st_n(s), sizeof(long long));
    if (!o->epoch) return -1;
    return lists_init(&o->q, st_n(s), 1);
}

static void ls_fini(Store *s) {
    LSStore *o = (LSStore *)s;
    lists_fini(&o->q);
    free(o->epoch);
}

static void ls_begin(Store *s, int64_t step, long layer) {
    (void)layer;
    LSStore *o = (LSStore *)s;
    if (o->ep == 0 || step != o->step) {      /* a new step: every current key goes stale */
        o->ep++;
        o->step = step;
    }
}

static void ls_hit(Store *s, int k, double w) {
    (void)w;
    LSStore *o = (LSStore *)s;
    int i = k - s->klo;
    if (o->epoch[i] == o->ep) return;         /* current: FIFO, it stays where it entered */
    l_move_to_tail(&o->q, 0, i);              /* stale -> current's tail */
    o->epoch[i] = o->ep;
}

static void ls_insert(Store *s, int k, double w) {
    (void)w;
    LSStore *o = (LSStore *)s;
    int i = k - s->klo;
    l_push(&o->q, 0, i);
    o->epoch[i] = o->ep;
}

static void ls_discard(Store *s, int k) {
    LSStore *o = (LSStore *)s;
    if (o->q.lid[k - s->klo] >= 0) l_remove(&o->q, k - s->klo);
}

static int ls_evict(Store *s, const Exclude *x, int incoming) {
    (void)incoming;
    LSStore *o = (LSStore *)s;
    int i = l_first_free(&o->q, 0, x, s->klo);
    if (i < 0) return -1;
    l_remove(&o->q, i);
    return s->klo + i;
}

static long ls_len(const Store *s) { return ((const LSStore *)s)->q.len[0]; }

static long ls_keys(const Store *s, int *out) {           /* stale, then current */
    return l_keys(&((const LSStore *)s)->q, 0, s->klo, out);
}

const StoreOps store_least_stale_ops = {
    .name = "least_stale", .flags = ST_CLOCKED, .size = sizeof(LSStore),
    .init = ls_init, .fini = ls_fini, .begin = ls_begin, .prepare = NULL,
    .hit = ls_hit, .miss = NULL, .admits = NULL, .evict = ls_evict, .insert = ls_insert,
    .discard = ls_discard, .len = ls_len, .keys = ls_keys, .resize = st_resize_plain,
    .set_param = st_set_param_none,
};
