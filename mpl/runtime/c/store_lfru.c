/* lfru: Least Frequently Recently Used (Bilal & Kang, IEEE Access 2017) as
 * mpl/runtime/eviction_published.py's class LFRU has it: a privileged LRU partition of
 * capacity - capacity // 3 slots over an unprivileged approximated-LFU partition. A new key
 * enters the unprivileged partition (the privileged one when that has no slot); a hit there
 * promotes it, and the privileged partition's overflow is demoted (frequency 1, a new tick).
 * Victims: the lowest (frequency, tick) unprivileged key not excluded (a scan), else the
 * least recent privileged one. A frequency is 1 when its key enters the unprivileged
 * partition (a hit there promotes the key out of it), multiplied by frequency_decay every
 * decay_interval accesses (hits and misses). */
#include "store_impl.h"

enum { PRIV = 0, UNPRIV = 1 };

typedef struct {
    Store base;
    Lists q;                 /* the privileged keys least recent first; the unprivileged ones */
    double *hf;              /* per unprivileged index: its frequency */
    long long *ht;           /* ... and the tick it entered */
    long long tick, clock, interval;
    double decay;
    long u_cap, p_cap;
} LFRUStore;

/* LFRU._demote: the privileged partition over its share -> its least recent keys (sparing
 * `protect`, -1 none) move to the unprivileged one */
static void lfru_demote(LFRUStore *o, int protect) {
    Lists *q = &o->q;
    while (q->len[PRIV] > o->p_cap) {
        int v = -1;
        for (int i = q->head[PRIV]; i >= 0; i = q->nxt[i])
            if (i != protect) { v = i; break; }
        if (v < 0) break;
        l_move_to_tail(q, UNPRIV, v);
        o->hf[v] = 1.0;
        o->ht[v] = ++o->tick;
    }
}

static void lfru_resize(Store *s, long cap) {
    LFRUStore *o = (LFRUStore *)s;
    s->cap = cap;
    o->u_cap = cap / 3;
    o->p_cap = cap - o->u_cap;
    lfru_demote(o, -1);
}

static int lfru_init(Store *s, const double *params) {
    LFRUStore *o = (LFRUStore *)s;
    int n = st_n(s);
    o->decay = params[SP_FREQUENCY_DECAY];
    o->interval = (long long)params[SP_DECAY_INTERVAL];
    o->hf = st_zalloc(n, sizeof(double));
    o->ht = st_zalloc(n, sizeof(long long));
    if (!o->hf || !o->ht || lists_init(&o->q, n, 2) < 0) return -1;
    lfru_resize(s, s->cap);
    return 0;
}

static void lfru_fini(Store *s) {
    LFRUStore *o = (LFRUStore *)s;
    lists_fini(&o->q);
    free(o->hf);
    free(o->ht);
}

static void lfru_set_param(Store *s, int param, double v) {
    LFRUStore *o = (LFRUStore *)s;
    if (param == SP_FREQUENCY_DECAY) o->decay = v;
    else if (param == SP_DECAY_INTERVAL) o->interval = (long long)v;
}

/* LFRU._clock */
static void lfru_clock(LFRUStore *o) {
    o->clock++;
    if (o->clock >= o->interval) {
        o->clock = 0;
        double d = o->decay;
        for (int i = o->q.head[UNPRIV]; i >= 0; i = o->q.nxt[i]) o->hf[i] = o->hf[i] * d;
    }
}

static void lfru_hit(Store *s, int k, double w) {
    (void)w;
    LFRUStore *o = (LFRUStore *)s;
    int i = k - s->klo;
    o->tick++;
    if (o->q.lid[i] == PRIV) l_move_to_tail(&o->q, PRIV, i);
    else {
        l_move_to_tail(&o->q, PRIV, i);                  /* promotion */
        lfru_demote(o, i);
    }
    lfru_clock(o);
}

static void lfru_miss(Store *s, int k, double w) {
    (void)k; (void)w;
    lfru_clock((LFRUStore *)s);
}

static void lfru_insert(Store *s, int k, double w) {
    (void)w;
    LFRUStore *o = (LFRUStore *)s;
    int i = k - s->klo;
    o->tick++;
    if (o->u_cap == 0) {
        l_push(&o->q, PRIV, i);
        lfru_demote(o, i);
    } else {
        o->hf[i] = 1.0;
        o->ht[i] = o->tick;
        l_push(&o->q, UNPRIV, i);
    }
}

static void lfru_discard(Store *s, int k) {
    LFRUStore *o = (LFRUStore *)s;
    int i = k - s->klo;
    if (o->q.lid[i] >= 0) l_remove(&o->q, i);
}

/* (frequency, tick): ticks are unique among the unprivileged keys */
static inline int lfru_less(const LFRUStore *o, int a, int b) {
    return o->hf[a] < o->hf[b] || (o->hf[a] == o->hf[b] && o->ht[a] < o->ht[b]);
}

static int lfru_evict(Store *s, const Exclude *x, int incoming) {
    (void)incoming;
    LFRUStore *o = (LFRUStore *)s;
    int best = -1;
    for (int i = o->q.head[UNPRIV]; i >= 0; i = o->q.nxt[i]) {
        if (ex_has(x, s->klo + i)) continue;
        if (best < 0 || lfru_less(o, i, best)) best = i;
    }
    if (best < 0) best = l_first_free(&o->q, PRIV, x, s->klo);
    if (best < 0) return -1;
    l_remove(&o->q, best);
    return s->klo + best;
}

static long lfru_len(const Store *s) {
    const LFRUStore *o = (const LFRUStore *)s;
    return o->q.len[PRIV] + o->q.len[UNPRIV];
}

static int lfru_key_less(const Store *s, int a, int b) {
    return lfru_less((const LFRUStore *)s, a, b);
}

/* the unprivileged keys by (frequency, tick), then the privileged ones least recent first */
static long lfru_keys(const Store *s, int *out) {
    const LFRUStore *o = (const LFRUStore *)s;
    long nu = 0;
    for (int i = o->q.head[UNPRIV]; i >= 0; i = o->q.nxt[i]) out[nu++] = i;
    nu = idx_keys(out, nu, lfru_key_less, s);
    return nu + l_keys(&o->q, PRIV, s->klo, out + nu);
}

const StoreOps store_lfru_ops = {
    .name = "lfru", .flags = ST_NEEDS_MISS, .size = sizeof(LFRUStore),
    .init = lfru_init, .fini = lfru_fini, .begin = NULL, .prepare = NULL,
    .hit = lfru_hit, .miss = lfru_miss, .admits = NULL, .evict = lfru_evict,
    .insert = lfru_insert, .discard = lfru_discard, .len = lfru_len, .keys = lfru_keys,
    .resize = lfru_resize, .set_param = lfru_set_param,
};
