/* Memory tiers in the compiled engine (tiers.h): mpl/runtime/tiers.py's TieredRuntime, rule
 * for rule and in the same order (each function names the method it follows), so that the
 * Plans, their steps and the statistics are those of the pure runtime, bit for bit. */
#include "tiers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static PyObject *s_ops[SO_COUNT];

/* ------------------------------------------------------------------ residency */
static inline Level *level_of_key(const Engine *o, int k) {
    return &o->tiers->lv[o->tiers->level_of[k / o->U]];
}

/* the tier t of L holds k (never the last tier: it holds every expert) */
static inline int t_has(const Engine *o, const Level *L, int t, int k) {
    return (t == 0 && L->gpu) ? o->slot[k] >= 0 : L->t[t].slot[k - L->klo] >= 0;
}

static inline int t_slot(const Engine *o, const Level *L, int t, int k) {
    return (t == 0 && L->gpu) ? o->slot[k] : L->t[t].slot[k - L->klo];
}

/* _held: k as tier t holds it (a resident k of a ladder tier: at its rung; else at the tier's
 * precision): its dtype, bits, a unit's bytes, exact */
static inline int held_rung(const Level *L, int t, int k) {
    return L->t[t].nrung ? L->t[t].rung[k - L->klo] : -1;
}
static inline int held_dtype(const Level *L, int t, int k) {
    int r = held_rung(L, t, k);
    return r < 0 ? L->t[t].dtype : L->t[t].rdtype[r];
}
static inline int held_bits(const Level *L, int t, int k) {
    int r = held_rung(L, t, k);
    return r < 0 ? L->t[t].bits : L->t[t].rbits[r];
}
static inline double held_bytes(const Level *L, int t, int k) {
    int r = held_rung(L, t, k);
    return r < 0 ? L->t[t].unit_bytes : L->t[t].rbytes[r];
}
static inline int held_exact(const Level *L, int t, int k) {
    int r = held_rung(L, t, k);
    return r < 0 ? L->t[t].exact : L->t[t].rexact[r];
}

/* Cache.remove in a tier below the device (LadderCache.remove: its rung's size back) */
static void t_remove(Level *L, int t, int k) {
    Tier *T = &L->t[t];
    int i = k - L->klo;
    if (T->nrung) {
        T->nat[T->rung[i]]--;
        T->used -= T->rbits[T->rung[i]];
        T->rung[i] = -1;
    }
    T->fstack[T->ftop++] = T->slot[i];
    T->slot[i] = -1;
    T->nres--;
    T->st->ops->discard(T->st, k);
}

/* _share: k's expert's share of its layer's last freq_window accesses (the window counts
 * experts: layer * E + expert) */
static double share(const Engine *o, int k) {
    const Tiers *X = o->tiers;
    long l = k / o->U, n = X->wlen ? X->wlen[l] : 0;
    if (!n) return 0.0;
    return (double)X->wcnt[k / o->S] / (double)n;
}

static inline int below(double share_, double thr) { return !isnan(thr) && share_ < thr; }

/* _moved: a unit of `bits` (an expert's 1 / split) crossed the host link (counted per
 * (precision, split), first seen first) */
static void moved(Tiers *X, int bits, int split) {
    for (int i = 0; i < X->nlink; i++)
        if (X->link_bits[i] == bits && X->link_split[i] == split) { X->link_n[i]++; return; }
    X->link_bits[X->nlink] = bits;       /* (at most TIER_LINKS pairs: tiers_build) */
    X->link_split[X->nlink] = split;
    X->link_n[X->nlink++] = 1;
}

static void approximate(Tiers *X, int dtype) {
    X->approx++;
    if (dtype >= 0) { X->approx_at[dtype]++; X->approx_seen[dtype] = 1; }
}

/* _host_tier: the tier a host-to-device copy of k reads */
static int host_tier(const Engine *o, const Level *L, int k) {
    for (int t = L->gpu; t < L->last; t++)
        if (t_has(o, L, t, k)) return t;
    return L->disk >= 0 ? L->read_into : L->last;
}

/* _copied: k copied into a gpu tier (nbytes a unit at its precision), from the gpu tier
 * `source` or, with source < 0, from host memory over the link */
static void copied(Engine *o, const Level *L, int k, int source, int bits, double nbytes) {
    if (source < 0) {
        moved(o->tiers, bits, L->split);
        source = host_tier(o, L, k);
    }
    Tier *S = &L->t[source];
    S->reads++;
    S->bytes_read += nbytes;
}

/* ------------------------------------------------------------------ admission, demotion */
static void demote(Engine *o, Level *L, int k, int t, const Exclude *x, Rec *r);

/* LadderCache._fit: the first rung a unit fits at in `room` (-1: none) */
static int fit(const Tier *T, int64_t room) {
    for (int r = 0; r < T->nrung; r++)
        if (T->rbits[r] <= room) return r;
    return -1;
}

/* where a cache tier keeps its keys: a set's top gpu tier is the engine's device cache (its
 * store, the key -> slot map o->slot, the one slot pool), a tier below it its own (slot map
 * indexed by key - klo) */
typedef struct {
    Store *st;
    int *slot, off;            /* k's slot: slot[k - off] */
    int *fstack;
    long *ftop, *nres;
} Place;

static Place place_of(Engine *o, Level *L, int t) {
    if (t == 0 && L->gpu) {
        Cache *c = &o->C[L - o->tiers->lv];
        return (Place){c->st, o->slot, 0, o->fstack, &o->ftop, &c->nres};
    }
    Tier *T = &L->t[t];
    return (Place){T->st, T->slot, L->klo, T->fstack, &T->ftop, &T->nres};
}

/* LadderCache.admit: k made resident in the ladder tier t (ladder.py's rule: room made from the
 * cold end, each key not in use one rung down, or out from the lowest rung, a REQUANT step per
 * step down): 0 with *slot and *victim (the first key out, whose slot k takes; the others in
 * T->also_*, their slots freed), -1 when k fits at no rung (nothing changed) */
static int ladder_admit(Engine *o, Level *L, int t, int k, double w, const Exclude *x, Rec *r, int *slot,
                        int *victim) {
    Tier *T = &L->t[t];
    Place p = place_of(o, L, t);
    Store *st = p.st;
    const int low = T->nrung - 1, *c = T->rbits;
    int64_t room = T->budget - T->used;
    int at, sl = -1, v = -1;
    T->nalso = 0;
    if (room < c[0] && !T->always) {
        int64_t kept = 0;              /* what stays whatever happens: the keys in use */
        long m = st->ops->keys(st, T->kbuf);
        for (long j = 0; j < m; j++)
            if (ex_has(x, T->kbuf[j])) kept += c[T->rung[T->kbuf[j] - L->klo]];
        if (fit(T, T->budget - kept) < 0) return -1;
        while (room < c[0]) {
            int moved_one = 0;
            m = st->ops->keys(st, T->kbuf);          /* coldest first */
            for (long j = 0; j < m && room < c[0]; j++) {
                int q = T->kbuf[j], i = q - L->klo, rr = T->rung[i];
                if (ex_has(x, q)) continue;
                moved_one = 1;
                if (rr < low) {
                    T->rung[i] = (signed char)(rr + 1);
                    T->nat[rr]--;
                    T->nat[rr + 1]++;
                    room += c[rr] - c[rr + 1];
                    T->used -= c[rr] - c[rr + 1];
                    rec_step(r, SO_REQUANT, q, t, t, p.slot[q - p.off], -1, T->rdtype[rr + 1], -1);
                    T->requants++;
                    continue;
                }
                st->ops->discard(st, q);
                T->nat[rr]--;
                T->rung[i] = -1;
                room += c[rr];
                T->used -= c[rr];
                if (v < 0) { v = q; sl = p.slot[q - p.off]; }
                else { T->also_k[T->nalso] = q; T->also_s[T->nalso++] = p.slot[q - p.off]; }
                p.slot[q - p.off] = -1;
                (*p.nres)--;
            }
            if (!moved_one) break;
        }
        for (long j = 0; j < T->nalso; j++) p.fstack[(*p.ftop)++] = T->also_s[j];
    }
    at = fit(T, room);
    if (at < 0 || (v < 0 && *p.ftop == 0)) return -1;   /* (room made: at >= 0 and a slot is free) */
    if (v < 0) sl = p.fstack[--*p.ftop];
    p.slot[k - p.off] = sl;
    T->rung[k - L->klo] = (signed char)at;
    T->nat[at]++;
    T->used += c[at];
    (*p.nres)++;
    st->ops->insert(st, k, w);
    *slot = sl;
    *victim = v;
    return 0;
}

/* _admit: k made resident in the cache tier t below the device: 0 with *slot and *victim (-1:
 * none; demoted; a ladder's further victims demoted too, a LEAVE step where nothing moved),
 * -1 when its rule does not admit it or nothing can leave */
static int admit(Engine *o, Level *L, int t, int k, double w, const Exclude *x, Rec *r, int *slot, int *victim) {
    Tier *T = &L->t[t];
    Store *st = T->st;
    if ((st->flags & ST_FILTERS) && !st->ops->admits(st, k)) return -1;
    if (T->nrung) {
        if (ladder_admit(o, L, t, k, w, x, r, slot, victim) < 0) return -1;
        if (*victim >= 0) {
            T->evictions++;
            demote(o, L, *victim, t, x, r);
        }
        for (long j = 0; j < T->nalso; j++) {
            T->evictions++;
            long n = r->nsteps;
            demote(o, L, T->also_k[j], t, x, r);
            if (r->nsteps == n && t > 0) rec_step(r, SO_LEAVE, T->also_k[j], t, t, T->also_s[j], -1, -1, -1);
        }
        return 0;
    }
    int sl, v = -1;
    if (T->nres >= T->slots || T->ftop == 0) {
        if (T->always) return -1;
        v = st->ops->evict(st, x, k);
        if (v < 0) return -1;
        sl = T->slot[v - L->klo];
        T->slot[v - L->klo] = -1;
        T->nres--;
    } else sl = T->fstack[--T->ftop];
    T->slot[k - L->klo] = sl;
    T->nres++;
    st->ops->insert(st, k, w);
    if (v >= 0) {
        T->evictions++;
        demote(o, L, v, t, x, r);
    }
    *slot = sl;
    *victim = v;
    return 0;
}

/* _demote: k left tier t: into the next cache tier below (not one whose residency is always)
 * when that tier takes it, by on demote's mechanism */
static void demote(Engine *o, Level *L, int k, int t, const Exclude *x, Rec *r) {
    Tiers *X = o->tiers;
    int d = t + 1;
    while (d < L->last && L->t[d].always) d++;
    if (d >= L->last || t_has(o, L, d, k)) return;
    Tier *D = &L->t[d];
    if (X->vac_k >= 0 && &X->lv[X->vac_lv] == L && X->vac_t == d && t_has(o, L, d, X->vac_k) &&
            (D->nres >= D->slots || D->nrung)) {
        /* the key promoted out of d makes room for k (a ladder: always, so that k lands at
         * the highest rung the room gives) */
        t_remove(L, d, X->vac_k);
        X->vac_k = -1;
    }
    int slot, victim;
    if (admit(o, L, d, k, o->wdef, x, r, &slot, &victim) < 0) return;
    int op = (d == t + 1 && L->t[t].requant) ? SO_REQUANT : SO_DEMOTE;
    rec_step(r, op, k, t, d, slot, victim, held_dtype(L, d, k), -1);
    D->demotions++;
    L->t[t].reads++;
    L->t[t].bytes_read += held_bytes(L, d, k);
}

/* _read: k read from the disk into the host tier above it (its rule and the promote(disk ->
 * host) threshold apply), else into a transient host buffer */
static void disk_read(Engine *o, Level *L, int k, double w, const Exclude *x, int kind, Rec *r) {
    Tiers *X = o->tiers;
    int h = L->read_into, slot = -1, victim = -1, dtype = L->t[h].dtype;
    if (!below(share(o, k), L->t[h].promote) && admit(o, L, h, k, w, x, r, &slot, &victim) == 0) {
        L->t[h].promotions++;
        dtype = held_dtype(L, h, k);
    }
    rec_step(r, SO_READ, k, L->disk, h, slot, victim, dtype, kind);
    X->fetched[k] = X->fstamp;
    L->t[L->disk].reads++;
    L->t[L->disk].bytes_read += L->t[L->disk].unit_bytes;
}

/* _host_copy: a full-precision copy of k is needed from host memory */
static void host_copy(Engine *o, Level *L, int k, double w, const Exclude *x, int kind, Rec *r) {
    if (L->disk >= 0 && !t_has(o, L, L->read_into, k) && o->tiers->fetched[k] != o->tiers->fstamp)
        disk_read(o, L, k, w, x, kind, r);
}

/* Runtime._load into the set's device cache (its top tier): the slot, or -1; *victim */
/* Runtime._gone of a key out of the device cache whose slot is already free (its eviction
 * recorded and counted, what it leaves forgotten, demoted below) */
static void top_gone(Engine *o, int v, int slot, Rec *r) {
    rec_evict(r, v, slot);
    o->evictions++;
    gone_state(o, v);
    tier_gone(o, v, r);
}

static int load_top(Engine *o, Level *L, int lvi, int k, double w, const Exclude *x, int kind, Rec *r,
                    int *victim) {
    Cache *c = &o->C[lvi];
    Store *st = c->st;
    *victim = -1;
    if ((st->flags & ST_FILTERS) && !st->ops->admits(st, k)) return -1;
    int sl, v = -1;
    if (L->t[0].nrung) {       /* a ladder top tier (its further victims leave after the load) */
        if (ladder_admit(o, L, 0, k, w, x, r, &sl, &v) < 0) return -1;
        if (v >= 0) top_gone(o, v, sl, r);
        rec_load(r, k, sl, v, kind);
        if (o->f_ttl) ttl_touch(o, k);
        for (long j = 0; j < L->t[0].nalso; j++) top_gone(o, L->t[0].also_k[j], L->t[0].also_s[j], r);
        *victim = v;
        return sl;
    }
    if (c->nres >= c->cap || o->ftop == 0) {
        if (c->fixed) return -1;
        v = st->ops->evict(st, x, k);
        if (v < 0) return -1;
        sl = o->slot[v];
        o->slot[v] = -1;
        c->nres--;
    } else sl = o->fstack[--o->ftop];
    o->slot[k] = sl;
    c->nres++;
    st->ops->insert(st, k, w);
    if (v >= 0) top_gone(o, v, sl, r);
    rec_load(r, k, sl, v, kind);
    if (o->f_ttl) ttl_touch(o, k);
    *victim = v;
    return sl;
}

/* _promote: k, found in tier `start`, loaded into the highest gpu tier above it that its
 * promotions reach and that takes it: that tier, or -1 */
static int promote(Engine *o, int lvi, int k, int start, double w, const Exclude *x, int kind, Rec *r) {
    Tiers *X = o->tiers;
    Level *L = &X->lv[lvi];
    int cand[64], nc = 0;      /* (a set has at most 64 tiers: tiers_build) */
    for (int t = start - 1; t >= 0; t--) {
        if (below(share(o, k), L->t[t].promote)) break;
        if (L->t[t].kind == TK_GPU) cand[nc++] = t;
    }
    int from_gpu = start < L->gpu;
    int src_bits = from_gpu ? held_bits(L, start, k) : 0;
    for (int j = nc - 1; j >= 0; j--) {
        int t = cand[j], slot, victim;
        Tier *T = &L->t[t];
        /* the copy comes from the source tier when it holds k at the target's precision or
         * better, else from host memory; a ladder's precision is the rung k lands at */
        int ladder = T->nrung > 0, device_copy = from_gpu && src_bits >= T->bits;
        if (!device_copy && !ladder) host_copy(o, L, k, w, x, kind, r);
        if (t == 0) {
            if (from_gpu) { X->vac_lv = lvi; X->vac_t = start; X->vac_k = k; }
            slot = load_top(o, L, lvi, k, w, x, kind, r, &victim);
            X->vac_k = -1;
            if (slot < 0) continue;
        } else if (admit(o, L, t, k, w, x, r, &slot, &victim) < 0) continue;
        int dtype = held_dtype(L, t, k), bits = held_bits(L, t, k);
        double nbytes = held_bytes(L, t, k);
        if (ladder) {
            device_copy = from_gpu && src_bits >= bits;
            if (!device_copy) host_copy(o, L, k, w, x, kind, r);
        }
        T->promotions++;
        if (from_gpu && t_has(o, L, start, k)) t_remove(L, start, k);   /* held once on the gpu */
        if (from_gpu || t > 0 || ladder) rec_step(r, SO_PROMOTE, k, start, t, slot, victim, dtype, kind);
        copied(o, L, k, device_copy ? start : -1, bits, nbytes);
        return t;
    }
    return -1;
}

/* _find: the fastest tier below the device holding k (the last when none does); the stores
 * it passes see a miss, the one holding it a hit */
static int find(Engine *o, int lvi, int k, double w) {
    Level *L = &o->tiers->lv[lvi];
    Store *dev = o->C[lvi].st;
    if (dev->flags & ST_NEEDS_MISS) dev->ops->miss(dev, k, w);
    for (int t = L->gpu ? 1 : 0; t < L->last; t++) {
        Store *st = L->t[t].st;
        if (t_has(o, L, t, k)) { st->ops->hit(st, k, w); return t; }
        if (st->flags & ST_NEEDS_MISS) st->ops->miss(st, k, w);
    }
    return L->last;
}

/* _tmiss: an access the device cache does not hold whole (the N parts of expert key k, N
 * its set's split); its place: a slot, W_CPU, W_STREAM, W_LOWER, or W_PARTS with every part's
 * place in pw[0..N) */
static long tier_miss(Engine *o, int lvi, int k, int N, double w, int to_cpu, Rec *r, long *pw) {
    Level *L = &o->tiers->lv[lvi];
    Exclude x = {o->mark, o->stamp, -1};
    Store *dev = o->C[lvi].st;
    int src[64], served = -1;  /* per part the tier it is found in (-1: the device cache) */
    for (int p = 0; p < N; p++) {
        int u = k + p;
        if (o->slot[u] >= 0) {       /* a part the device holds: a hit of that part */
            dev->ops->hit(dev, u, w);
            if (o->pf[u]) { o->pf[u] = 0; o->pf_useful++; }
            if (o->f_ttl) ttl_touch(o, u);
            src[p] = -1;
        } else src[p] = find(o, lvi, u, w);
        if (src[p] > served) served = src[p];
    }
    Tier *S = &L->t[served];
    S->hits++;
    if (S->nrung) {                  /* a ladder: the rung it served at (its parts' lowest) */
        int at = 0;
        for (int p = 0; p < N; p++)
            if (src[p] == served && S->rung[k + p - L->klo] > at) at = S->rung[k + p - L->klo];
        S->at[at]++;
    }
    if (L->disk >= 0)
        for (int p = 0; p < N; p++)
            if (src[p] == L->disk) disk_read(o, L, k + p, w, &x, PK_DEMAND, r);
    if (to_cpu && served >= L->gpu) {   /* computed on the CPU from host memory, loaded for later */
        o->cpu_computes++;
        for (int p = 0; p < N; p++) {
            if (src[p] < L->gpu) continue;
            int start = src[p] == L->disk ? L->read_into : src[p];
            if (promote(o, lvi, k + p, start, w, &x, PK_BACKGROUND, r) == 0) o->background++;
        }
        return W_CPU;
    }
    int low_t = -1, low_bits = 0, low_dt = -1;   /* the lowest precision computed from */
    for (int p = 0; p < N; p++) {
        int u = k + p, s = src[p], t = 0;
        if (s == -1) pw[p] = o->slot[u];
        else {
            t = promote(o, lvi, u, s == L->disk ? L->read_into : s, w, &x, PK_DEMAND, r);
            if (t == 0) {
                o->demand++;
                pw[p] = o->slot[u];
            } else {
                if (t < 0 && s < L->gpu) t = s;       /* computed from the lower gpu tier holding it */
                if (t < 0) {                          /* a transient device buffer, from host memory */
                    o->streamed++;
                    moved(o->tiers, o->tiers->stored_bits, L->split);
                    Tier *H = &L->t[host_tier(o, L, u)];
                    H->reads++;
                    H->bytes_read += L->t[L->last].unit_bytes;
                    pw[p] = W_STREAM;
                    continue;
                }
                rec_step(r, SO_SERVE, u, t, t, t_slot(o, L, t, u), -1, held_dtype(L, t, u), -1);
                pw[p] = W_LOWER;
            }
        }
        if (!held_exact(L, t, u) && (low_t < 0 || held_bits(L, t, u) < low_bits)) {
            low_t = t;
            low_bits = held_bits(L, t, u);
            low_dt = held_dtype(L, t, u);
        }
    }
    if (low_t >= 0) {
        L->t[low_t].approximate++;
        approximate(o->tiers, low_dt);
    }
    return N == 1 ? pw[0] : W_PARTS;
}

/* ------------------------------------------------------------------ the dispatch */
void tier_begin(Engine *o, long layer, const long *ex, long n) {
    Tiers *X = o->tiers;
    Level *L = &X->lv[X->level_of[layer]];
    X->fstamp++;
    /* the cache tiers' clocks (a set's top gpu tier is the engine's cache, clocked there; a
     * set without a gpu tier has none, and its first tier is clocked here) */
    for (int t = L->gpu ? 1 : 0; t < L->last; t++) {
        Store *st = L->t[t].st;
        if (st->flags & ST_CLOCKED) st->ops->begin(st, o->step, layer);
    }
    if (!L->thresholds) return;
    /* the dispatch's accesses enter its layer's window (its room reserved: tiers_reserve) */
    int *q = X->wq[layer], *cnt = X->wcnt + layer * o->E;
    long cap = X->wcap[layer];
    for (long j = 0; j < n; j++) {
        int e = (int)ex[j];
        cnt[e]++;
        if (X->wlen[layer] < cap) {
            q[(X->whead[layer] + X->wlen[layer]) % cap] = e;
            X->wlen[layer]++;
        } else {                             /* full: the oldest leaves as e enters */
            cnt[q[X->whead[layer]]]--;
            q[X->whead[layer]] = e;
            X->whead[layer] = (X->whead[layer] + 1) % cap;
        }
    }
}

/* _rung_hit: a hit of the N parts of expert key k in a ladder top tier, counted at their
 * lowest rung; a part below the first rung is computed from that copy (a SERVE step whose
 * source and target are the top tier) */
static void rung_hit(Engine *o, Level *L, int k, int N, Rec *r) {
    Tier *T = &L->t[0];
    int low = 0;
    for (int p = 0; p < N; p++) {
        int at = T->rung[k + p - L->klo];
        if (!at) continue;
        rec_step(r, SO_SERVE, k + p, 0, 0, o->slot[k + p], -1, T->rdtype[at], -1);
        if (at > low) low = at;
    }
    T->at[low]++;
    if (!T->rexact[low]) {
        T->approximate++;
        approximate(o->tiers, T->rdtype[low]);
    }
}

void tier_accesses(Engine *o, const Args *a, Rec *r, const int *ord, const double *wv, int64_t *cnt) {
    const long n = a->n, *ex = a->ex;
    int lvi = o->tiers->level_of[a->layer];
    Level *L = &o->tiers->lv[lvi];
    const Tier *T0 = &L->t[0];
    const int N = L->split;
    Store *st = o->C[lvi].st;
    int first_miss = 1, to_cpu = 0;
    int64_t nhit = 0;
    for (long ii = 0; ii < n; ii++) {
        long i = ord ? ord[ii] : ii, one;
        long *pw = o->S > 1 ? r->pw + i * o->S : &one;
        int k = key_of(o, a->layer, ex[i]);
        double w = wv ? wv[i] : o->wdef;
        if (o->f_ttl) o->accesses++;
        int whole = 1;
        for (int p = 0; p < N && whole; p++) whole = o->slot[k + p] >= 0;
        if (whole) {                 /* every part in the top tier (a whole expert: its one) */
            r->where[i] = N == 1 ? o->slot[k] : W_PARTS;
            r->hit[i] = 1;
            nhit++;
            for (int p = 0; p < N; p++) {
                int u = k + p;
                pw[p] = o->slot[u];
                st->ops->hit(st, u, w);
                if (o->f_ttl) ttl_touch(o, u);
                if (o->pf[u]) { o->pf[u] = 0; o->pf_useful++; }
            }
            if (T0->nrung) rung_hit(o, L, k, N, r);   /* (its SERVE steps and counts: no store reads them) */
            continue;
        }
        r->hit[i] = 0;
        if (first_miss) {
            first_miss = 0;
            to_cpu = o->mode == MODE_CPU || (o->mode == MODE_HYBRID && (double)a->tokens < o->cpu_limit);
        }
        r->where[i] = tier_miss(o, lvi, k, N, w, to_cpu, r, pw);
    }
    memset(cnt, 0, sizeof(int64_t) * 6);
    cnt[4] = nhit;
}

/* TieredRuntime._gone: a key left the device cache: counted, demoted below it */
void tier_gone(Engine *o, int k, Rec *r) {
    Level *L = level_of_key(o, k);
    Tier *T0 = &L->t[0];
    if (T0->nrung && T0->rung[k - L->klo] >= 0) {   /* LadderCache.remove / evict_one: its size back */
        T0->nat[T0->rung[k - L->klo]]--;
        T0->used -= T0->rbits[T0->rung[k - L->klo]];
        T0->rung[k - L->klo] = -1;
    }
    T0->evictions++;
    if (L->gpu) {
        Exclude x = {o->mark, o->stamp, -1};
        demote(o, L, k, 0, &x, r);
    }
}

/* the keys a prefetch round protects from eviction: the dispatch's and every proposal's
 * (every part; a proposal is an expert's layer * E + expert) */
static void protect_round(Engine *o, Exclude *px, long layer, const long *ex, long n, long np) {
    Tiers *X = o->tiers;
    const long S = o->S;
    px->stamp = ++X->pstamp;
    for (long q = 0; q < n; q++)
        for (long p = 0; p < S; p++) X->pmark[key_of(o, layer, ex[q]) + p] = px->stamp;
    for (long q = 0; q < np; q++)
        for (long p = 0; p < S; p++) X->pmark[o->props[q] * S + p] = px->stamp;
}

/* TieredRuntime._issue: each proposal (an expert's layer * E + expert), every part of it */
void tier_issue(Engine *o, long np, long layer, const long *ex, long n, Rec *r) {
    Tiers *X = o->tiers;
    mark_inuse(o, layer, ex, n);
    Exclude px = {X->pmark, 0, -1};
    int protect = 0;
    long cnt = 0;
    for (long j = 0; j < np; j++) {
        int lvi = X->level_of[o->props[j] / o->E];
        Level *L = &X->lv[lvi];
        if (!L->gpu) continue;                 /* no device cache to load into */
        for (int p = 0; p < L->split; p++) {
            int k = (int)(o->props[j] * o->S + p);
            Cache *c = &o->C[lvi];
            Store *st = c->st;
            if (o->slot[k] >= 0 || c->nres > c->cap) continue;
            if ((st->flags & ST_FILTERS) && !st->ops->admits(st, k)) continue;
            Tier *T0 = &L->t[0];
            int slot, v = -1, ladder = T0->nrung > 0;
            if ((ladder || c->nres >= c->cap || o->ftop == 0) && !protect) {
                protect_round(o, &px, layer, ex, n, np);
                protect = 1;
            }
            if (ladder) {                          /* its rung is the ladder's to give */
                if (ladder_admit(o, L, 0, k, o->wdef, &px, r, &slot, &v) < 0) continue;
                if (v >= 0) top_gone(o, v, slot, r);
                for (long q = 0; q < T0->nalso; q++) top_gone(o, T0->also_k[q], T0->also_s[q], r);
            } else if (c->nres >= c->cap || o->ftop == 0) {
                if (c->fixed) continue;
                v = st->ops->evict(st, &px, k);
                if (v < 0) continue;
                slot = o->slot[v];
                o->slot[v] = -1;
                c->nres--;
                top_gone(o, v, slot, r);
            } else slot = o->fstack[--o->ftop];
            int dtype = held_dtype(L, 0, k), bits = held_bits(L, 0, k);
            double nbytes = held_bytes(L, 0, k);
            int s = L->last;                       /* _where_now */
            for (int t = 1; t < L->last; t++)
                if (t_has(o, L, t, k)) { s = t; break; }
            int from_gpu = s > 0 && s < L->gpu;
            int device_copy = from_gpu && held_bits(L, s, k) >= bits;
            if (!device_copy) {                    /* (a disk read spares the round's keys too) */
                if (!protect) { protect_round(o, &px, layer, ex, n, np); protect = 1; }
                host_copy(o, L, k, o->wdef, &px, PK_PREFETCH, r);
            }
            if (!ladder) {
                o->slot[k] = slot;
                c->nres++;
                st->ops->insert(st, k, o->wdef);
            }
            if (o->f_ttl) ttl_touch(o, k);
            rec_load(r, k, slot, v, PK_PREFETCH);
            cnt++;
            o->pf[k] = 1;
            T0->promotions++;
            if (from_gpu) t_remove(L, s, k);
            if (from_gpu || ladder) rec_step(r, SO_PROMOTE, k, s, 0, slot, v, dtype, PK_PREFETCH);
            copied(o, L, k, device_copy ? s : -1, bits, nbytes);
        }
    }
    o->pf_loads += cnt;
}

double tier_used_bytes(const Engine *o) {
    const Tiers *X = o->tiers;
    double out = 0.0;
    for (long i = 0; i < X->nlv; i++) {
        const Tier *T = &X->lv[i].t[0];
        if (!o->C[i].cap) continue;
        if (T->nrung) out += (double)T->used * T->rbytes[0] / (double)T->rbits[0];   /* bit-units -> bytes */
        else out += (double)o->C[i].nres * T->unit_bytes;
    }
    return out;
}

void tier_between(Engine *o) {
    o->tiers->fstamp++;
}

/* ------------------------------------------------------------------ room before a dispatch */
int tiers_reserve(Engine *o, long layer, long n) {
    Tiers *X = o->tiers;
    Level *L = &X->lv[X->level_of[layer]];
    for (int t = L->gpu ? 1 : 0; t < L->last; t++) {   /* (the stores _find passes: each part) */
        Store *st = L->t[t].st;
        if (st->ops->prepare && st->ops->prepare(st, layer, n * L->split) < 0) return -1;
    }
    if (!L->thresholds || n <= 0) return 0;
    long len = X->wlen[layer], need = n <= X->window - len ? len + n : X->window;
    if (need <= X->wcap[layer]) return 0;
    long cap = X->wcap[layer];
    int *q = malloc(sizeof(int) * (size_t)need);
    if (!q) return -1;
    for (long j = 0; j < len; j++) q[j] = X->wq[layer][(X->whead[layer] + j) % cap];
    free(X->wq[layer]);
    X->wq[layer] = q;
    X->wcap[layer] = need;
    X->whead[layer] = 0;
    return 0;
}

/* ------------------------------------------------------------------ construction */
static int bad(const char *what) {
    PyErr_Format(ConfigError, "engine configuration: tiers: %s", what);
    return -1;
}

static void *zal(size_t n, size_t item) { return calloc(n ? n : 1, item); }

/* a tier's store: its rule NULL (lru), a name ("lfu", "lfu | lru") or weighted_sum's ((rule, weight), ...)
 * (every pair converted before any store is made); 0, -1 with an exception */
static int tier_store(Engine *o, const Level *L, Store **sp, PyObject *rule, long cap) {
    int rc;
    if (!rule || PyUnicode_Check(rule)) {
        const char *name = rule ? PyUnicode_AsUTF8(rule) : "lru";
        if (!name) return -1;
        rc = store_make(sp, name, cap, L->klo, L->khi, o->L, o->U, o->S, o->sp);
    } else {
        const char *names[8];
        double w[8];
        Py_ssize_t n = PyTuple_Check(rule) ? PyTuple_GET_SIZE(rule) : 0;
        if (n < 2 || n > 8) return bad("a tier's weighted_sum");
        for (Py_ssize_t j = 0; j < n; j++) {
            PyObject *pair = PyTuple_GET_ITEM(rule, j);
            if (!PyTuple_Check(pair)) return bad("a tier's weighted_sum");
            if (!PyArg_ParseTuple(pair, "sd", &names[j], &w[j])) return -1;
        }
        rc = store_make_weighted(sp, names, w, (int)n, cap, L->klo, L->khi, o->L, o->U, o->S, o->sp);
    }
    if (rc == -1) { PyErr_NoMemory(); return -1; }
    if (rc < 0) return bad("a tier's eviction rule is none the compiled engine has");
    return 0;
}

/* a ladder tier's rungs ((dtype, bits, unit_bytes, exact), ...), highest first, and its size
 * in bit-units: 0, -1 with an exception */
static int rungs_from(Engine *o, Tier *T, PyObject *rungs, long long budget) {
    Py_ssize_t n = PyTuple_Check(rungs) ? PyTuple_GET_SIZE(rungs) : 0;
    if (n < 2 || n > 8 || budget < 1 || budget > ((long long)1 << 62)) return bad("a tier's dtype_ladder");
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *it = PyTuple_GET_ITEM(rungs, r);
        if (!PyTuple_Check(it)) return bad("a tier's dtype_ladder");
        if (!PyArg_ParseTuple(it, "iidi", &T->rdtype[r], &T->rbits[r], &T->rbytes[r], &T->rexact[r])) return -1;
        int b = T->rbits[r];
        if (T->rdtype[r] < 0 || T->rdtype[r] >= o->tiers->ndtypes || (b != 4 && b != 8 && b != 16 && b != 32) ||
                !(T->rbytes[r] > 0) || !isfinite(T->rbytes[r]))
            return bad("a tier's dtype_ladder");
    }
    T->nrung = (int)n;
    T->budget = (int64_t)budget;
    return 0;
}

/* one tier: (name, location, dtype, kind, bits, exact, always, requant, unit_bytes, promote,
 * slots, rule: None, a name or weighted_sum's pairs, rungs: None or a dtype_ladder's, budget) */
static int tier_from(Engine *o, Level *L, int t, int lvi, PyObject *spec) {
    Tier *T = &L->t[t];
    PyObject *rule, *rungs;
    long long slots, budget;
    if (!PyArg_ParseTuple(spec, "UUiiiiiiddLOOL", &T->name, &T->location, &T->dtype, &T->kind, &T->bits,
                          &T->exact, &T->always, &T->requant, &T->unit_bytes, &T->promote, &slots, &rule,
                          &rungs, &budget))
        return -1;
    if (T->dtype < -1 || T->dtype >= o->tiers->ndtypes || T->kind < TK_GPU || T->kind > TK_DISK ||
            (T->bits != 4 && T->bits != 8 && T->bits != 16 && T->bits != 32) || !(T->unit_bytes > 0) ||
            !isfinite(T->unit_bytes) || !(isnan(T->promote) || (T->promote >= 0 && T->promote <= 1)))
        return bad("a tier's values");
    int last = t == L->n - 1;
    if (last != (slots < 0) || slots > INT_MAX || slots == 0 || (T->kind == TK_DISK && !last))
        return bad("a tier's slots");
    T->slots = (long)slots;
    if (last) return rungs == Py_None ? 0 : bad("a dtype_ladder on the last tier");
    if (rule == Py_None) return bad("a cache tier without an eviction rule");
    if (rungs != Py_None && rungs_from(o, T, rungs, budget) < 0) return -1;
    long keys = L->nlayers * o->E * L->split;
    Store **sp = &T->st;
    long cap = T->slots;
    if (t == 0 && T->kind == TK_GPU) {    /* the set's device cache: the engine's */
        sp = &o->C[lvi].st;
        o->C[lvi].cap = cap;
        o->C[lvi].fixed = T->always;
    } else {
        T->pool = cap < keys ? cap : keys;
        T->ftop = T->pool;
        if (!(T->slot = malloc(sizeof(int) * (size_t)(L->khi - L->klo))) ||
                !(T->fstack = zal((size_t)T->pool, sizeof(int)))) { PyErr_NoMemory(); return -1; }
        memset(T->slot, 0xff, sizeof(int) * (size_t)(L->khi - L->klo));
        for (long i = 0; i < T->pool; i++) T->fstack[i] = (int)(T->pool - 1 - i);
    }
    if (T->nrung) {       /* a ladder: per key its rung (-1: not resident); the walk's buffers, as
                           * long as it can hold keys (its slots; a top tier's are the pool's) */
        size_t nk = (size_t)(L->khi - L->klo), nb = (size_t)(sp == &T->st ? T->pool : keys);
        if (!(T->rung = malloc(nk)) || !(T->kbuf = zal(nb, sizeof(int))) || !(T->also_k = zal(nb, sizeof(int))) ||
                !(T->also_s = zal(nb, sizeof(int)))) {
            PyErr_NoMemory();
            return -1;
        }
        memset(T->rung, 0xff, nk);
    }
    return tier_store(o, L, sp, T->always ? NULL : rule, cap);   /* (always: Fixed, an lru that never evicts) */
}

/* one set of tiers: (label, layers, gpu, disk, read_into, split, tiers) */
static int level_from(Engine *o, int lvi, PyObject *spec) {
    Tiers *X = o->tiers;
    Level *L = &X->lv[lvi];
    PyObject *layers, *tiers;
    if (!PyArg_ParseTuple(spec, "UO!iiiiO!", &L->label, &PyTuple_Type, &layers, &L->gpu, &L->disk,
                          &L->read_into, &L->split, &PyTuple_Type, &tiers))
        return -1;
    Py_ssize_t nl = PyTuple_GET_SIZE(layers), nt = PyTuple_GET_SIZE(tiers);
    if (nl < 1 || nl > o->L || nt < 1 || nt > 64) return bad("a set's layers or tiers");
    if (L->split < 1 || L->split > o->S) return bad("a set's granularity_split");
    L->n = (int)nt;
    L->last = L->n - 1;
    if (L->gpu < 0 || L->gpu > L->n || L->disk < -1 || L->disk >= L->n || L->read_into < -1 ||
            L->read_into >= L->n || (L->disk >= 0) != (L->read_into >= 0) || (L->disk >= 0 && L->disk != L->last) ||
            (L->disk >= 0 && L->read_into == L->disk))
        return bad("a set's gpu, disk or read_into");
    if (!(L->layers = malloc(sizeof(long) * (size_t)nl))) { PyErr_NoMemory(); return -1; }
    L->nlayers = (long)nl;
    long lo = o->L, hi = -1;
    for (Py_ssize_t i = 0; i < nl; i++) {
        long l = PyLong_AsLong(PyTuple_GET_ITEM(layers, i));
        if (l == -1 && PyErr_Occurred()) return -1;
        if (l < 0 || l >= o->L || X->level_of[l] != lvi) return bad("a set's layers");
        L->layers[i] = l;
        if (l < lo) lo = l;
        if (l > hi) hi = l;
    }
    L->klo = (int)(lo * o->U);
    L->khi = (int)((hi + 1) * o->U);
    if (!(L->t = zal((size_t)nt, sizeof(Tier)))) { PyErr_NoMemory(); return -1; }
    for (int t = 0; t < L->n; t++)
        if (tier_from(o, L, t, lvi, PyTuple_GET_ITEM(tiers, t)) < 0) return -1;
    for (int t = 0; t < L->n; t++) {
        if ((t < L->gpu) != (L->t[t].kind == TK_GPU)) return bad("the gpu tiers are not the first");
        if (!isnan(L->t[t].promote)) L->thresholds = 1;
    }
    if (L->read_into >= 0 && L->t[L->read_into].kind != TK_CPU) return bad("a disk read into a tier that is not host memory");
    if (!L->gpu) o->C[lvi].cap = 0;
    if (!L->gpu && store_make(&o->C[lvi].st, "lru", 0, L->klo, L->khi, o->L, o->U, o->S, o->sp) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* cfg["tiers"]: (stored_bits, window, level_of, dtypes, levels) */
int tiers_build(Engine *o, PyObject *spec) {
    PyObject *level_of, *dtypes, *levels;
    Tiers *X = o->tiers = calloc(1, sizeof(Tiers));
    if (!X) { PyErr_NoMemory(); return -1; }
    X->vac_k = -1;
    if (!PyArg_ParseTuple(spec, "ilO!O!O!", &X->stored_bits, &X->window, &PyTuple_Type, &level_of,
                          &PyTuple_Type, &dtypes, &PyTuple_Type, &levels))
        return -1;
    if ((X->stored_bits != 16 && X->stored_bits != 32) || X->window < 1 || X->window > 1000000 ||
            PyTuple_GET_SIZE(level_of) != o->L || PyTuple_GET_SIZE(levels) != o->ncaches ||
            PyTuple_GET_SIZE(dtypes) > 64)
        return bad("its shape");
    X->dtypes = dtypes;
    X->ndtypes = (int)PyTuple_GET_SIZE(dtypes);
    X->nlv = o->ncaches;
    size_t K = (size_t)o->K;
    if (!(X->level_of = malloc(sizeof(int) * (size_t)o->L)) || !(X->lv = zal((size_t)X->nlv, sizeof(Level))) ||
            !(X->fetched = zal(K, sizeof(int64_t))) || !(X->pmark = zal(K, sizeof(int64_t))) ||
            !(X->approx_at = zal((size_t)X->ndtypes, sizeof(int64_t))) ||
            !(X->approx_seen = zal((size_t)X->ndtypes, 1))) {
        PyErr_NoMemory();
        return -1;
    }
    for (long l = 0; l < o->L; l++) {
        long i = PyLong_AsLong(PyTuple_GET_ITEM(level_of, l));
        if (i == -1 && PyErr_Occurred()) return -1;
        if (i < 0 || i >= X->nlv) return bad("a layer's set");
        X->level_of[l] = (int)i;
    }
    o->lcache = X->level_of;
    int thresholds = 0;
    for (long i = 0; i < X->nlv; i++) {
        if (level_from(o, (int)i, PyTuple_GET_ITEM(levels, i)) < 0) return -1;
        thresholds |= X->lv[i].thresholds;
    }
    for (long l = 0; l < o->L; l++)      /* every layer is in the set level_of names */
        if (X->lv[X->level_of[l]].nlayers == 0) return bad("a set without layers");
    if (thresholds) {
        if (!(X->wq = zal((size_t)o->L, sizeof(int *))) || !(X->wcap = zal((size_t)o->L, sizeof(long))) ||
                !(X->whead = zal((size_t)o->L, sizeof(long))) || !(X->wlen = zal((size_t)o->L, sizeof(long))) ||
                !(X->wcnt = zal((size_t)o->L * (size_t)o->E, sizeof(int)))) {
            PyErr_NoMemory();
            return -1;
        }
    }
    if (!s_ops[0]) {
        static const char *names[SO_COUNT] = {"read", "promote", "demote", "requant", "serve", "leave"};
        for (int i = 0; i < SO_COUNT; i++)
            if (!(s_ops[i] = PyUnicode_InternFromString(names[i]))) return -1;
    }
    return 0;
}

void tiers_free(Engine *o) {
    Tiers *X = o->tiers;
    if (!X) return;
    for (long i = 0; X->lv && i < X->nlv; i++) {
        Level *L = &X->lv[i];
        for (int t = 0; L->t && t < L->n; t++) {
            if (L->t[t].st) store_free(L->t[t].st);
            free(L->t[t].slot);
            free(L->t[t].fstack);
            free(L->t[t].rung); free(L->t[t].kbuf); free(L->t[t].also_k); free(L->t[t].also_s);
        }
        free(L->t);
        free(L->layers);
    }
    if (X->wq) for (long l = 0; l < o->L; l++) free(X->wq[l]);
    free(X->wq); free(X->wcap); free(X->whead); free(X->wlen); free(X->wcnt);
    free(X->lv); free(X->level_of); free(X->fetched); free(X->pmark); free(X->approx_at); free(X->approx_seen);
    free(X);
    o->tiers = NULL;
    o->lcache = NULL;
}

/* ------------------------------------------------------------------ reads */
struct TierSnap {
    long nlv;
    Tier **t;              /* per set a copy of its tiers (their counters) */
    long *top_nres;
    int nlink, link_bits[TIER_LINKS], link_split[TIER_LINKS];
    int64_t link_n[TIER_LINKS], approx, *approx_at;
    unsigned char *approx_seen;
};

void tier_snap_free(TierSnap *s) {
    if (!s) return;
    if (s->t) for (long i = 0; i < s->nlv; i++) free(s->t[i]);
    free(s->t); free(s->top_nres); free(s->approx_at); free(s->approx_seen);
    free(s);
}

TierSnap *tier_snap(const Engine *o) {
    const Tiers *X = o->tiers;
    TierSnap *s = calloc(1, sizeof(TierSnap));
    if (!s) return NULL;
    s->nlv = X->nlv;
    if (!(s->t = zal((size_t)X->nlv, sizeof(Tier *))) || !(s->top_nres = zal((size_t)X->nlv, sizeof(long))) ||
            !(s->approx_at = zal((size_t)X->ndtypes, sizeof(int64_t))) || !(s->approx_seen = zal((size_t)X->ndtypes, 1))) {
        tier_snap_free(s);
        return NULL;
    }
    for (long i = 0; i < X->nlv; i++) {
        const Level *L = &X->lv[i];
        if (!(s->t[i] = malloc(sizeof(Tier) * (size_t)L->n))) { tier_snap_free(s); return NULL; }
        memcpy(s->t[i], L->t, sizeof(Tier) * (size_t)L->n);
        s->top_nres[i] = o->C[i].nres;
    }
    s->nlink = X->nlink;
    memcpy(s->link_bits, X->link_bits, sizeof s->link_bits);
    memcpy(s->link_split, X->link_split, sizeof s->link_split);
    memcpy(s->link_n, X->link_n, sizeof s->link_n);
    s->approx = X->approx;
    if (X->ndtypes) {
        memcpy(s->approx_at, X->approx_at, sizeof(int64_t) * (size_t)X->ndtypes);
        memcpy(s->approx_seen, X->approx_seen, (size_t)X->ndtypes);
    }
    return s;
}

static PyObject *num_or_none(long long v, int none) {
    return none ? Py_NewRef(Py_None) : PyLong_FromLongLong(v);
}

/* a ladder tier's part of its row: dtype_ladder, served_at, resident_at, requantized */
static int ladder_row(const Tiers *X, const Tier *T, PyObject *row) {
    PyObject *names = PyList_New(T->nrung), *served = PyDict_New(), *resident = PyDict_New(), *x = NULL;
    int rc = -1;
    if (!names || !served || !resident) goto done;
    for (int r = 0; r < T->nrung; r++) {
        PyObject *d = PyTuple_GET_ITEM(X->dtypes, T->rdtype[r]);
        PyList_SET_ITEM(names, r, Py_NewRef(d));
        if (!(x = PyLong_FromLongLong((long long)T->at[r])) || PyDict_SetItem(served, d, x) < 0) goto done;
        Py_SETREF(x, PyLong_FromLongLong((long long)T->nat[r]));
        if (!x || PyDict_SetItem(resident, d, x) < 0) goto done;
        Py_CLEAR(x);
    }
    if (!(x = PyLong_FromLongLong((long long)T->requants)) || PyDict_SetItemString(row, "dtype_ladder", names) < 0 ||
            PyDict_SetItemString(row, "served_at", served) < 0 || PyDict_SetItemString(row, "resident_at", resident) < 0 ||
            PyDict_SetItemString(row, "requantized", x) < 0)
        goto done;
    rc = 0;
done:
    Py_XDECREF(x); Py_XDECREF(names); Py_XDECREF(served); Py_XDECREF(resident);
    return rc;
}

int tier_stats(Engine *o, TierSnap *s, const int64_t *l_hit, PyObject *out) {
    const Tiers *X = o->tiers;
    int rc = -1;
    PyObject *rows = PyList_New(0), *by = PyDict_New(), *x = NULL;
    if (!rows || !by) goto done;
    /* bytes_loaded: what crossed the link, at the precision it landed at, a part an expert's
     * 1 / split */
    double total = 0.0;
    for (int i = 0; i < s->nlink; i++)
        total += (double)s->link_n[i] * o->expert_bytes * (double)s->link_bits[i] / (double)X->stored_bits /
                 (double)s->link_split[i];
    if (!(x = PyLong_FromDouble(total)) || PyDict_SetItemString(out, "bytes_loaded", x) < 0) goto done;
    Py_CLEAR(x);
    int64_t approx = s->approx;
    for (long i = 0; i < s->nlv; i++) {
        const Level *L = &X->lv[i];
        int64_t top_hits = 0;
        for (long j = 0; j < L->nlayers; j++) top_hits += l_hit[L->layers[j]];
        for (int t = 0; t < L->n; t++) {
            const Tier *T = &s->t[i][t];
            int64_t hits = T->hits, a = T->approximate;
            if (t == 0 && T->kind == TK_GPU) {
                hits += top_hits;
                if (!T->exact && !T->nrung) {       /* (a ladder's: counted at its rungs as they happen) */
                    a += top_hits;
                    approx += top_hits;
                    if (T->dtype >= 0) { s->approx_at[T->dtype] += top_hits; s->approx_seen[T->dtype] = 1; }
                }
            }
            long resident = t == L->last ? 0 : (t == 0 && T->kind == TK_GPU) ? s->top_nres[i] : T->nres;
            PyObject *dt = T->dtype >= 0 ? PyTuple_GET_ITEM(X->dtypes, T->dtype) : Py_None;
            PyObject *cap = num_or_none(T->slots, t == L->last), *res = num_or_none(resident, t == L->last);
            PyObject *br = PyLong_FromDouble(T->bytes_read);
            PyObject *row = (cap && res && br) ? Py_BuildValue(
                "{s:O,s:O,s:O,s:O,s:O,s:O,s:L,s:L,s:L,s:L,s:L,s:L,s:O}", "set", L->label, "tier", T->name,
                "location", T->location, "dtype", dt, "capacity", cap, "resident", res,
                "hits", (long long)hits, "approximate", (long long)a, "promotions", (long long)T->promotions,
                "demotions", (long long)T->demotions, "evictions", (long long)T->evictions,
                "reads", (long long)T->reads, "bytes_read", br) : NULL;
            Py_XDECREF(cap); Py_XDECREF(res); Py_XDECREF(br);
            if (!row || (T->nrung && ladder_row(X, T, row) < 0)) { Py_XDECREF(row); goto done; }
            int e = PyList_Append(rows, row);
            Py_DECREF(row);
            if (e < 0) goto done;
        }
    }
    for (int d = 0; d < X->ndtypes; d++) {
        if (!s->approx_seen[d]) continue;
        if (!(x = PyLong_FromLongLong((long long)s->approx_at[d])) ||
                PyDict_SetItem(by, PyTuple_GET_ITEM(X->dtypes, d), x) < 0) goto done;
        Py_CLEAR(x);
    }
    if (!(x = PyLong_FromLongLong((long long)approx)) || PyDict_SetItemString(out, "approximate_computes", x) < 0 ||
            PyDict_SetItemString(out, "approximate_by_dtype", by) < 0 || PyDict_SetItemString(out, "tiers", rows) < 0)
        goto done;
    rc = 0;
done:
    Py_XDECREF(x); Py_XDECREF(rows); Py_XDECREF(by);
    tier_snap_free(s);
    return rc;
}

PyObject *tier_steps_list(Engine *o, const Rec *r, PyObject *step_type, PyObject *const *kinds) {
    PyObject *l = PyList_New(r->nsteps);
    if (!l) return NULL;
    for (long j = 0; j < r->nsteps; j++) {
        const PlanStep *p = &r->steps[j];
        PyObject *it[8] = {Py_NewRef(s_ops[p->op]), engine_key(o, p->key), PyLong_FromLong(p->source),
                           PyLong_FromLong(p->target), PyLong_FromLong(p->slot),
                           p->victim >= 0 ? engine_key(o, p->victim) : Py_NewRef(Py_None),
                           Py_NewRef(p->dtype >= 0 ? PyTuple_GET_ITEM(o->tiers->dtypes, p->dtype) : Py_None),
                           Py_NewRef(p->kind >= 0 ? kinds[p->kind] : Py_None)};
        int ok = 1;
        for (int i = 0; i < 8; i++) ok &= it[i] != NULL;
        /* Step is a tuple subclass (setup checked): allocated and filled at once */
        PyObject *s = ok ? ((PyTypeObject *)step_type)->tp_alloc((PyTypeObject *)step_type, 8) : NULL;
        if (!s) {
            for (int i = 0; i < 8; i++) Py_XDECREF(it[i]);
            Py_DECREF(l);
            return NULL;
        }
        for (int i = 0; i < 8; i++) PyTuple_SET_ITEM(s, i, it[i]);
        PyList_SET_ITEM(l, j, s);
    }
    return l;
}
