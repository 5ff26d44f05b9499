/* s3fifo: the rule's struct and its hot operations are in store_s3fifo.h. */
#include "store_s3fifo.h"

static void s3_resize(Store *s, long cap) {
    S3Store *o = (S3Store *)s;
    s->cap = cap;
    o->s_limit = 0.1 * (double)cap;
    o->m_limit = (double)cap - o->s_limit;
    long g = (long)(0.9 * (double)cap);                 /* int(0.9 * capacity) */
    o->g_cap = g > 1 ? g : 1;
    while (o->q.len[GQ] > o->g_cap) l_remove(&o->q, o->q.head[GQ]);
}

static int s3_init(Store *s, const double *params) {
    (void)params;
    S3Store *o = (S3Store *)s;
    o->freq = st_zalloc(st_n(s), 1);
    if (!o->freq || lists_init(&o->q, st_n(s), 3) < 0) return -1;
    s3_resize(s, s->cap);
    return 0;
}

static void s3_fini(Store *s) {
    S3Store *o = (S3Store *)s;
    lists_fini(&o->q);
    free(o->freq);
}

static void s3_discard(Store *s, int k) {
    S3Store *o = (S3Store *)s;
    int i = k - s->klo, l = o->q.lid[i];
    if (l == SQ || l == MQ) {                            /* (a ghost stays) */
        l_remove(&o->q, i);
        o->freq[i] = 0;
    }
}

static long s3_len(const Store *s) {
    const S3Store *o = (const S3Store *)s;
    return o->q.len[SQ] + o->q.len[MQ];
}

static long s3_keys(const Store *s, int *out) {             /* S then M */
    const S3Store *o = (const S3Store *)s;
    long n = l_keys(&o->q, SQ, s->klo, out);
    return n + l_keys(&o->q, MQ, s->klo, out + n);
}

const StoreOps store_s3fifo_ops = {
    .name = "s3fifo", .flags = 0, .size = sizeof(S3Store),
    .init = s3_init, .fini = s3_fini, .begin = NULL, .prepare = NULL,
    .hit = s3_hit, .miss = NULL, .admits = NULL, .evict = s3_evict, .insert = s3_insert,
    .discard = s3_discard, .len = s3_len, .keys = s3_keys, .resize = s3_resize,
    .set_param = st_set_param_none,
};
