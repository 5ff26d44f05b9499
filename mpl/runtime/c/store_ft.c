/* frequency_threshold (mpl/runtime/eviction_basic.py, class FrequencyThreshold): an admission
 * filter on recent share. Every access (hit or miss) of layer L enters L's window of its last
 * freq_window accesses; a missed key is admitted only if its share of that window (the
 * access included) is >= freq_threshold; the victim is the resident with the lowest share,
 * ties to the least recently accessed.
 *
 * The victim is found without a scan of the residents: each layer's residents sit in their own
 * indexed heap ordered by (count in the window, last access). Within a layer every share has
 * the same denominator (the window's length), so that order is the order of (share, last
 * access) (count / length is strictly increasing in the count for a positive length, and an
 * empty window holds no counts); the victim is the least of the layers' least non-excluded
 * residents, compared by their shares. An access changes at most the counts of the key and of
 * the entries leaving the window, each a heap fix in its layer: an eviction costs one look per
 * layer instead of one per resident (a shared cache of thousands of keys).
 *
 * A window is a ring with room for what it may hold: prepare(layer, n) makes room for n more
 * accesses before they happen (never more than freq_window entries, or what a window holds
 * beyond a freq_window that shrank), so that an access never allocates. A window that holds
 * its room is full: the next entry overwrites the oldest, which is the class's append and its
 * first departure; more entries leave after freq_window shrank, as the class drops them, one
 * access at a time. */
#include "store_impl.h"

/* one layer's heap of its residents: indices local to the layer (its first index at off), the
 * store's counts and ticks seen from there; base.klo: the layer's first key (IHEAP_DEFINE's
 * exclusion test reads it) */
typedef struct {
    struct { int klo; } base;
    IHeap h;
    const int *cnt;
    const long long *last;
    int off;
} FTHeap;

#define FTH_LESS(s, a, b) ((s)->cnt[a] < (s)->cnt[b] || \
                           ((s)->cnt[a] == (s)->cnt[b] && (s)->last[a] < (s)->last[b]))
IHEAP_DEFINE(fth, FTHeap, FTH_LESS)

typedef struct {
    Store base;
    FTHeap *hp;              /* per layer served: its residents' heap (the residents) */
    long nres;               /* the residents, in all */
    long long *last;         /* per index: the tick of its last access */
    int *cnt;                /* per index: its entries in its layer's window */
    int *lay;                /* per index: its layer's window, (klo + index) / E - l0 */
    long long tick;
    double thr;              /* cache.freq_threshold */
    long W;                  /* cache.freq_window */
    long l0, nl;             /* the layers of the keys served: [l0, l0 + nl) */
    int **wr;                /* per layer: its ring of indices (NULL: no room yet) */
    long *wroom, *whead, *wlen;
} FTStore;

static int ft_init(Store *s, const double *params) {
    FTStore *o = (FTStore *)s;
    int n = st_n(s);
    o->thr = params[SP_FREQ_THRESHOLD];
    o->W = (long)params[SP_FREQ_WINDOW];
    o->l0 = s->klo / s->E;
    o->nl = (s->khi - 1) / s->E + 1 - o->l0;
    o->last = st_zalloc(n, sizeof(long long));
    o->cnt = st_zalloc(n, sizeof(int));
    o->lay = st_zalloc(n, sizeof(int));
    o->wr = st_zalloc(o->nl, sizeof(int *));
    o->wroom = st_zalloc(o->nl, sizeof(long));
    o->whead = st_zalloc(o->nl, sizeof(long));
    o->wlen = st_zalloc(o->nl, sizeof(long));
    o->hp = st_zalloc(o->nl, sizeof(FTHeap));
    if (!o->last || !o->cnt || !o->lay || !o->wr || !o->wroom || !o->whead || !o->wlen || !o->hp)
        return -1;
    for (int i = 0; i < n; i++) o->lay[i] = (int)((s->klo + i) / s->E - o->l0);
    for (long l = 0; l < o->nl; l++) {
        /* the layer's keys: [max(klo, its first), min(khi, its last + 1)) */
        long first = (o->l0 + l) * s->E, end = first + s->E;
        if (first < s->klo) first = s->klo;
        if (end > s->khi) end = s->khi;
        FTHeap *H = &o->hp[l];
        H->off = (int)(first - s->klo);
        H->base.klo = (int)first;
        H->cnt = o->cnt + H->off;
        H->last = o->last + H->off;
        if (iheap_init(&H->h, (int)(end - first)) < 0) return -1;
    }
    return 0;
}

static void ft_fini(Store *s) {
    FTStore *o = (FTStore *)s;
    if (o->wr) for (long l = 0; l < o->nl; l++) free(o->wr[l]);
    if (o->hp) for (long l = 0; l < o->nl; l++) iheap_fini(&o->hp[l].h);
    free(o->hp);
    free(o->wr); free(o->wroom); free(o->whead); free(o->wlen);
    free(o->last); free(o->cnt); free(o->lay);
}

/* room for `need` entries in window l (its entries kept, oldest first): -1 when memory ran
 * out, and then nothing changed */
static int ft_room(FTStore *o, long l, long need) {
    long room = o->wroom[l];
    if (need <= room) return 0;
    long nr = room > o->W / 2 ? o->W : 2 * room;       /* grow geometrically up to W */
    if (nr < need) nr = need;
    int *nw = st_zalloc(nr, sizeof(int));
    if (!nw) return -1;
    for (long j = 0; j < o->wlen[l]; j++) nw[j] = o->wr[l][(o->whead[l] + j) % room];
    free(o->wr[l]);
    o->wr[l] = nw;
    o->wroom[l] = nr;
    o->whead[l] = 0;
    return 0;
}

/* room in layer's window for n more entries, up to W (or what it holds beyond a W that
 * shrank); a layer this store does not serve needs none */
static int ft_prepare(Store *s, long layer, long n) {
    FTStore *o = (FTStore *)s;
    long l = layer - o->l0;
    if (l < 0 || l >= o->nl || n <= 0) return 0;
    long len = o->wlen[l], cap = o->W > len ? o->W : len;
    long need = n <= cap - len ? len + n : cap;
    return ft_room(o, l, need);
}

/* index i's place in its layer's heap after its count or tick changed (not in it: nothing) */
static inline void ft_fix(FTStore *o, int i) {
    FTHeap *H = &o->hp[o->lay[i]];
    int p = H->h.pos[i - H->off];
    if (p < 0) return;
    fth_up(H, p);
    fth_down(H, H->h.pos[i - H->off]);
}

/* the window's entries count experts: an entry for the expert whose first index is b adds d
 * to the count of each of its P indices (its parts share their expert's count, as the
 * class's counts are by (layer, expert)) */
static inline void ft_count(FTStore *o, int b, int d) {
    for (long p = 0; p < o->base.P; p++) {
        o->cnt[b + p] += d;
        ft_fix(o, b + (int)p);
    }
}

/* FrequencyThreshold._observe: index i's access enters its layer's window (as its expert:
 * its first index; klo is a multiple of P) */
static void ft_observe(FTStore *o, int i) {
    long l = o->lay[i];
    long room = o->wroom[l];
    if (room <= 0) return;                   /* (only when prepare was not called) */
    int *w = o->wr[l];
    i -= (int)(i % o->base.P);
    ft_count(o, i, 1);
    if (o->wlen[l] < room) {
        w[(o->whead[l] + o->wlen[l]) % room] = i;
        o->wlen[l]++;
    } else {                                 /* full: the oldest leaves as i enters */
        int j = w[o->whead[l]];
        ft_count(o, j, -1);
        w[o->whead[l]] = i;
        o->whead[l] = (o->whead[l] + 1) % room;
    }
    while (o->wlen[l] > o->W) {
        ft_count(o, w[o->whead[l]], -1);
        o->whead[l] = (o->whead[l] + 1) % room;
        o->wlen[l]--;
    }
}

/* FrequencyThreshold.share: index i's count over its layer's window (0.0 for an empty one) */
static inline double ft_share(const FTStore *o, int i) {
    long n = o->wlen[o->lay[i]];
    if (!n) return 0.0;
    return (double)o->cnt[i] / (double)n;
}

/* (share, last access): the last ticks are unique */
static inline int ft_less(const FTStore *o, int a, int b) {
    double sa = ft_share(o, a), sb = ft_share(o, b);
    return sa < sb || (sa == sb && o->last[a] < o->last[b]);
}

static void ft_hit(Store *s, int k, double w) {
    (void)w;
    FTStore *o = (FTStore *)s;
    int i = k - s->klo;
    ft_observe(o, i);
    o->last[i] = ++o->tick;
    ft_fix(o, i);
}

static void ft_miss(Store *s, int k, double w) {
    (void)w;
    ft_observe((FTStore *)s, k - s->klo);
}

static int ft_admits(const Store *s, int k) {
    const FTStore *o = (const FTStore *)s;
    return ft_share(o, k - s->klo) >= o->thr;
}

static void ft_insert(Store *s, int k, double w) {
    (void)w;
    FTStore *o = (FTStore *)s;
    int i = k - s->klo;
    o->last[i] = ++o->tick;
    FTHeap *H = &o->hp[o->lay[i]];
    fth_push(H, i - H->off);
    o->nres++;
}

/* index i's place in its layer's heap, -1 when it is not a resident */
static inline int ft_pos(const FTStore *o, int i) {
    const FTHeap *H = &o->hp[o->lay[i]];
    return H->h.pos[i - H->off];
}

/* index i leaves the residents (it is one) */
static void ft_drop(FTStore *o, int i) {
    fth_remove_at(&o->hp[o->lay[i]], ft_pos(o, i));
    o->nres--;
}

static void ft_discard(Store *s, int k) {
    FTStore *o = (FTStore *)s;
    if (ft_pos(o, k - s->klo) >= 0) ft_drop(o, k - s->klo);
}

static int ft_evict(Store *s, const Exclude *x, int incoming) {
    (void)incoming;
    FTStore *o = (FTStore *)s;
    /* each layer's least non-excluded resident; the least of those by ft_less, with best's
     * share and tick kept (nothing changes during the search) */
    int best = -1;
    double sb = 0.0;
    long long tb = 0;
    for (long l = 0; l < o->nl; l++) {
        FTHeap *H = &o->hp[l];
        long p = fth_first_free(H, x);
        if (p < 0) continue;
        int i = H->off + H->h.a[p];
        double sa = ft_share(o, i);
        if (best < 0 || sa < sb || (sa == sb && o->last[i] < tb)) {
            best = i;
            sb = sa;
            tb = o->last[i];
        }
    }
    if (best < 0) return -1;
    ft_drop(o, best);
    return s->klo + best;
}

static long ft_len(const Store *s) { return ((const FTStore *)s)->nres; }

static int ft_key_less(const Store *s, int a, int b) { return ft_less((const FTStore *)s, a, b); }

static long ft_keys(const Store *s, int *out) {
    const FTStore *o = (const FTStore *)s;
    long n = 0;                  /* every layer's residents (sorted below: any order will do) */
    for (long l = 0; l < o->nl; l++) {
        const FTHeap *H = &o->hp[l];
        for (long j = 0; j < H->h.n; j++) out[n++] = H->off + H->h.a[j];
    }
    return idx_keys(out, n, ft_key_less, s);
}

static void ft_set_param(Store *s, int param, double v) {
    FTStore *o = (FTStore *)s;
    if (param == SP_FREQ_THRESHOLD) o->thr = v;
    else if (param == SP_FREQ_WINDOW) o->W = (long)v;   /* a shorter window drops its oldest
                                                         * entries as accesses come */
}

const StoreOps store_frequency_threshold_ops = {
    .name = "frequency_threshold", .flags = ST_NEEDS_MISS | ST_FILTERS | ST_SIDE | ST_LAYERED,
    .size = sizeof(FTStore),
    .init = ft_init, .fini = ft_fini, .begin = NULL, .prepare = ft_prepare,
    .hit = ft_hit, .miss = ft_miss, .admits = ft_admits, .evict = ft_evict, .insert = ft_insert,
    .discard = ft_discard, .len = ft_len, .keys = ft_keys, .resize = st_resize_plain,
    .set_param = ft_set_param,
};
