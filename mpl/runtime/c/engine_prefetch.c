/* The engine's prefetching: the routing history (prefetch.History), the affinity table
 * (prefetch.Affinity), the learned predictor's calls, the proposals of a dispatch
 * (Runtime._proposals, and the generated dispatch's one-layer-ahead shortcut) and their issue
 * as PREFETCH loads (Runtime._issue). */
#include "engine.h"
#include "tiers.h"

#include <stdlib.h>
#include <string.h>

int prefetch_init(Engine *o) {
    if (o->f_history && ring_init(&o->hr, o->L, o->lrn_window) < 0) { PyErr_NoMemory(); return -1; }
    return 0;
}

/* the targets and candidates of a proposal round now: min(budget, E) per target, at most
 * min(budget, D * E) proposals, D = min(lookahead, L) targets */
static void round_shape(const Engine *o, long *D, long *bq, long *bmax) {
    long L = o->L, E = o->E;
    *D = o->next_only ? 1 : (o->lookahead < L ? o->lookahead : L);
    if (*D < 1) *D = 1;
    *bq = o->budget < E ? o->budget : E;
    if (*bq < 0) *bq = 0;
    long de = *D * E;
    *bmax = o->budget < de ? o->budget : de;
    if (*bmax < 0) *bmax = 0;
}

/* room for a proposal round (before a dispatch changes any state): 0, -1 */
int prefetch_reserve(Engine *o) {
    if (!o->f_prefetch) return 0;
    long D, bq, bmax;
    round_shape(o, &D, &bq, &bmax);
    long need_p = bmax > 0 ? bmax : 1, need_h = D * (bq > 0 ? bq : 1);
    if (need_p > o->cprops) {
        int *p = realloc(o->props, sizeof(int) * (size_t)need_p);
        if (!p) return -1;
        o->props = p;
        o->cprops = need_p;
    }
    if (need_h > o->chsort) {
        int *h = realloc(o->hsort, sizeof(int) * (size_t)need_h);
        if (!h) return -1;
        o->hsort = h;
        o->chsort = need_h;
    }
    if (D > o->cpcn || !o->pcn) {             /* per target its candidates' count */
        long *c = realloc(o->pcn, sizeof(long) * (size_t)(D > 0 ? D : 1));
        if (!c) return -1;
        o->pcn = c;
        o->cpcn = D;
    }
    return 0;
}

/* ------------------------------------------------------------------ history */
/* History.observe: the row enters the window and the rows beyond it leave; counts move by
 * the net change of each expert, and the largest count reached is that of History's
 * buckets (they grow one at a time, never past a final count) */
void history_observe(Engine *o, long layer, const long *ex, long n) {
    Ring *r = &o->hr;
    r->W = o->lrn_window;
    ring_push(r, layer, ex, n);
    int *delta = o->hdelta, *touched = o->htouched;
    long nt = 0;
    for (long j = 0; j < n; j++) {
        int e = (int)ex[j];
        if (!delta[e]++) touched[nt++] = e;
    }
    while (r->len[layer] > r->W) {
        long oi = ring_pop(r, layer);
        for (int j = 0; j < r->rown[oi]; j++) {
            int e = r->rows[oi][j];
            if (!delta[e]--) touched[nt++] = e;
        }
    }
    int *cnt = o->hcnt + layer * o->E;
    for (long q = 0; q < nt; q++) {
        int e = touched[q];
        if (delta[e]) {
            cnt[e] += delta[e];
            if (cnt[e] > o->hbk[layer]) o->hbk[layer] = cnt[e];
            delta[e] = 0;
        }
    }
}

/* History.top(layer, b): experts by count desc, then id; into out, their number */
static long history_top(Engine *o, long layer, long b, int *out) {
    if (b <= 0) return 0;
    const int *cnt = o->hcnt + layer * o->E;
    long n = 0;
    for (long e = 0; e < o->E; e++) {
        int c = cnt[e];
        if (c <= 0) continue;
        long q = n < b ? n : b;
        if (q == b && !(c > cnt[out[b - 1]])) continue;   /* not better than the last kept */
        if (q == b) q = b - 1;
        while (q > 0 && cnt[out[q - 1]] < c) { out[q] = out[q - 1]; q--; }
        out[q] = (int)e;
        if (n < b) n++;
    }
    return n;
}

/* ------------------------------------------------------------------ affinity */
/* A row's kept targets (id, cn: AFF_KEEP of them, count desc then id asc, -1 after the last)
 * once target e's count has risen to x: e moves up past those it now beats, entering in
 * the place of the last when it beats it. Only e's count changed, so the others keep their
 * order and the row's AFF_KEEP most frequent targets are still the kept ones. */
static void top_raise(int *id, long long *cn, int e, long long x) {
    int p = 0;
    while (p < AFF_KEEP && id[p] >= 0 && id[p] != e) p++;
    if (p == AFF_KEEP) {                                   /* not kept, and the row is full */
        p = AFF_KEEP - 1;
        if (!(x > cn[p] || (x == cn[p] && e < id[p]))) return;
    }
    while (p > 0 && (x > cn[p - 1] || (x == cn[p - 1] && e < id[p - 1]))) {
        id[p] = id[p - 1];
        cn[p] = cn[p - 1];
        p--;
    }
    id[p] = e;
    cn[p] = x;
}

/* Affinity.observe(layer, step, experts) */
void affinity_observe(Engine *o, long layer, const long *ex, long n) {
    long L = o->L, E = o->E;
    long D = o->aff_depth < L ? o->aff_depth : L;
    for (long d = 1; d <= D; d++) {
        long src = layer - d;
        long long src_step = o->step;
        if (src < 0) { src += L; src_step = o->step - 1; }
        if (!o->aff_has[src] || o->aff_step[src] != src_step) continue;
        long t = (d - 1) * L + src;
        o->aff_tab[t] = 1;
        const int *last = o->aff_last + src * E;
        /* the counts first, then the kept targets: the counts' reads (far apart in a large
         * table) do not wait on each other */
        for (int j = 0; j < o->aff_lastn[src]; j++) {
            o->aff_n[t * E + last[j]]++;
            long long *c = o->aff_c + (t * E + last[j]) * E;
            for (long q = 0; q < n; q++) c[ex[q]]++;
        }
        for (int j = 0; j < o->aff_lastn[src]; j++) {
            long r = t * E + last[j];
            const long long *c = o->aff_c + r * E;
            for (long q = 0; q < n; q++)
                top_raise(o->aff_top + r * AFF_KEEP, o->aff_topc + r * AFF_KEEP, (int)ex[q], c[ex[q]]);
        }
    }
    o->aff_has[layer] = 1;
    o->aff_step[layer] = o->step;
    for (long q = 0; q < n; q++) o->aff_last[layer * E + q] = (int)ex[q];
    o->aff_lastn[layer] = (int)n;
}

/* target a ranks before target b: more probable, or as probable and a lower id */
static inline int aff_before(const double *best, int a, int b) {
    return best[a] > best[b] || (best[a] == best[b] && a < b);
}

/* target e among the first b of out[0..*m) (aff_before's order): in its place when there is
 * room or it ranks before the last, which then leaves */
static inline void aff_keep(const double *best, int *out, long *m, long b, int e) {
    if (*m == b && !aff_before(best, e, out[b - 1])) return;
    long q = *m < b ? *m : b - 1;
    while (q > 0 && aff_before(best, e, out[q - 1])) { out[q] = out[q - 1]; q--; }
    out[q] = e;
    if (*m < b) (*m)++;
}

/* Affinity.predict(layer, experts, d): targets with P >= threshold, most probable first
 * (ties: lower id), at most b of them */
static long affinity_top(Engine *o, long layer, const long *ex, long n, long d, long b, int *out) {
    long L = o->L, E = o->E;
    long D = o->aff_depth < L ? o->aff_depth : L;
    if (d > D || b <= 0) return 0;
    long t = (d - 1) * L + layer;
    if (!o->aff_tab[t]) return 0;
    double *best = o->aff_best;
    /* per target the largest P = count / row count over the dispatch's experts. While every
     * row count is below 2**24 two distinct fractions of such integers are further apart
     * than the doubles' rounding, so comparing them exactly as integers (no division) orders
     * them as their doubles do; the winner's double is computed once. Otherwise: doubles. */
    int exact = 1;
    for (long q = 0; q < n && exact; q++) exact = o->aff_n[t * E + ex[q]] < (1LL << 24);
    if (exact && b <= AFF_KEEP) {
        /* Only the rows' kept targets can be among the first b: a target that is not kept
         * in the row of its largest P has AFF_KEEP >= b targets before it there, each at
         * least as probable overall (and ahead of it on a tie). So each kept target's P is
         * taken over the rows that keep it (exact for every target that can be chosen). */
        long long *bc = o->aff_bc, *bn = o->aff_bn;
        int *cand = o->aff_cand;
        long nc = 0, m = 0;
        for (long q = 0; q < n; q++) {
            long long rn = o->aff_n[t * E + ex[q]];
            if (!rn) continue;
            const int *tid = o->aff_top + (t * E + ex[q]) * AFF_KEEP;
            const long long *tc = o->aff_topc + (t * E + ex[q]) * AFF_KEEP;
            for (int j = 0; j < AFF_KEEP && tid[j] >= 0; j++) {
                int e2 = tid[j];
                long long x = tc[j];
                if (!bn[e2]) { cand[nc++] = e2; bc[e2] = x; bn[e2] = rn; }
                else if (x * bn[e2] > bc[e2] * rn) { bc[e2] = x; bn[e2] = rn; }
            }
        }
        for (long i = 0; i < nc; i++) {
            int e2 = cand[i];
            best[e2] = (double)bc[e2] / (double)bn[e2];
            bn[e2] = 0;
            if (best[e2] >= o->aff_thr) aff_keep(best, out, &m, b, e2);
        }
        return m;
    }
    if (exact) {
        long long *bc = o->aff_bc, *bn = o->aff_bn;
        for (long e2 = 0; e2 < E; e2++) { bc[e2] = 0; bn[e2] = 1; }
        for (long q = 0; q < n; q++) {
            long long rn = o->aff_n[t * E + ex[q]];
            if (!rn) continue;
            const long long *c = o->aff_c + (t * E + ex[q]) * E;
            for (long e2 = 0; e2 < E; e2++) {
                long long x = c[e2];
                if (x * bn[e2] > bc[e2] * rn) { bc[e2] = x; bn[e2] = rn; }
            }
        }
        for (long e2 = 0; e2 < E; e2++) {
            best[e2] = bc[e2] ? (double)bc[e2] / (double)bn[e2] : -1.0;
            bn[e2] = 0;                            /* (as the kept targets' path expects) */
        }
    } else {
        for (long e2 = 0; e2 < E; e2++) best[e2] = -1.0;
        for (long q = 0; q < n; q++) {
            long long rn = o->aff_n[t * E + ex[q]];
            if (!rn) continue;
            const long long *c = o->aff_c + (t * E + ex[q]) * E;
            for (long e2 = 0; e2 < E; e2++) {
                if (!c[e2]) continue;
                double p = (double)c[e2] / (double)rn;
                if (p > best[e2]) best[e2] = p;
            }
        }
    }
    long m = 0;
    for (long e2 = 0; e2 < E; e2++)
        if (best[e2] >= 0.0 && best[e2] >= o->aff_thr) aff_keep(best, out, &m, b, (int)e2);
    return m;
}

/* ------------------------------------------------------------------ _rank */
/* _rank(kind, layer, step, experts, top) -> list: the engine's own history (kind 0) or
 * affinity (kind 1) predictor, the one its policy configured, observes one dispatch of
 * `layer` at `step` selecting `experts` (distinct ids) and ranks its predictions for the
 * next layer, at most `top`: history the target layer's experts by count (ties: lower id),
 * affinity the targets of these experts one layer ahead by probability (ties: lower id).
 * Nothing else of the runtime changes (no cache, no statistics, its step kept): what
 * mpl.tune_predict scores, as prefetch.History.top and prefetch.Affinity.predict rank. Every
 * argument is an exact int (experts a list or tuple of them), checked before the lock. */
PyObject *engine_rank(Engine *o, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "_rank(kind, layer, step, experts, top)");
        return NULL;
    }
    long long v[4];
    const int at[4] = {0, 1, 2, 4};
    for (int i = 0; i < 4; i++) {
        PyObject *x = args[at[i]];
        int ovf = 0;
        if (!PyLong_CheckExact(x)) { PyErr_SetString(PyExc_TypeError, "_rank: kind, layer, step and top are ints"); return NULL; }
        v[i] = PyLong_AsLongLongAndOverflow(x, &ovf);
        if (ovf || (v[i] == -1 && PyErr_Occurred())) { PyErr_Clear(); v[i] = -1; }
    }
    long long kind = v[0], layer = v[1], step = v[2], top = v[3];
    if (kind != 0 && kind != 1) { PyErr_SetString(PyExc_ValueError, "_rank: kind is 0 (history) or 1 (affinity)"); return NULL; }
    if (kind == 0 ? !o->f_history : (!o->f_affinity || o->aff_depth < 1)) {
        PyErr_SetString(PyExc_ValueError, "_rank: the policy does not configure that predictor");
        return NULL;
    }
    if (layer < 0 || layer >= o->L) { PyErr_SetString(PyExc_ValueError, "_rank: layer out of range"); return NULL; }
    if (step < 0 || step > STEP_MAX) { PyErr_SetString(PyExc_ValueError, "_rank: step out of range (0 .. 2**62)"); return NULL; }
    if (top < 0) { PyErr_SetString(PyExc_ValueError, "_rank: top must be >= 0"); return NULL; }
    if (top > o->E) top = o->E;
    PyObject *seq = args[3];
    if (!PyList_Check(seq) && !PyTuple_Check(seq)) { PyErr_SetString(PyExc_TypeError, "_rank: experts is a list or tuple of ints"); return NULL; }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > o->E) { PyErr_SetString(PyExc_ValueError, "_rank: more experts than the layer has"); return NULL; }
    long *ex = malloc(sizeof(long) * (size_t)(n ? n : 1));
    unsigned char *seen = calloc((size_t)o->E, 1);
    int *out = malloc(sizeof(int) * (size_t)(top ? top : 1));
    if (!ex || !seen || !out) { free(ex); free(seen); free(out); return PyErr_NoMemory(); }
    PyObject *res = NULL;
    /* a list's items are read while nothing but this loop runs (no user code: exact ints) */
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *x = PySequence_Fast_GET_ITEM(seq, j);
        int ovf = 0;
        if (!PyLong_CheckExact(x)) { PyErr_SetString(PyExc_TypeError, "_rank: experts is a list or tuple of ints"); goto out; }
        long long e = PyLong_AsLongLongAndOverflow(x, &ovf);
        if (ovf || e < 0 || e >= o->E) { PyErr_SetString(PyExc_ValueError, "_rank: an expert out of range"); goto out; }
        if (seen[e]) { PyErr_SetString(PyExc_ValueError, "_rank: experts must be distinct"); goto out; }
        seen[e] = 1;
        ex[j] = (long)e;
    }
    if (engine_lock(o, "a prediction") < 0) goto out;
    long m;
    if (kind == 0) {
        if (ring_reserve(&o->hr, (long)layer, (long)n) < 0) { engine_unlock(o); PyErr_NoMemory(); goto out; }
        history_observe(o, (long)layer, ex, (long)n);
        m = history_top(o, layer + 1 == o->L ? 0 : (long)layer + 1, (long)top, out);
    } else {
        int64_t kept = o->step;
        o->step = step;
        affinity_observe(o, (long)layer, ex, (long)n);
        m = affinity_top(o, (long)layer, ex, (long)n, 1, (long)top, out);
        o->step = kept;
    }
    engine_unlock(o);
    res = PyList_New(m);
    for (long j = 0; res && j < m; j++) {
        PyObject *x = PyLong_FromLong(out[j]);
        if (!x) Py_CLEAR(res);
        else PyList_SET_ITEM(res, j, x);
    }
out:
    free(ex); free(seen); free(out);
    return res;
}

/* ------------------------------------------------------------------ learned */
/* self.learned.observe(layer, self.step, experts, weights, predictions) */
int learned_observe(Engine *o, long layer, const Args *a) {
    long ng = 0;
    if (a->given) {
        for (long t = 0; t < o->L; t++) {
            if (o->pr_at[t] != o->pr_call) continue;
            GateArg *g = &o->gates[ng++];
            g->t = t;
            g->st = t > layer ? o->step : o->step + 1;
            g->n = o->pr_len[t];
            g->ids = o->pr_ids + o->pr_off[t];
        }
    }
    return lrn_observe(o->lrn, layer, o->step, a->ex, a->n, a->w, o->gates, ng);
}

/* ------------------------------------------------------------------ proposals */
/* this call's predictions for target layer t: their number (-1: none given for t), *ids */
static inline long pr_for(const Engine *o, int given, long t, const long **ids) {
    if (!given || o->pr_at[t] != o->pr_call) return -1;
    *ids = o->pr_ids + o->pr_off[t];
    return o->pr_len[t];
}

/* Runtime._proposals (and the one-layer-ahead shortcut of the generated dispatch) into
 * o->props: their number, or -1 (the learned predictor found no memory) */
static long proposals(Engine *o, long layer, const long *ex, long n, int given) {
    long L = o->L, E = o->E, D, bq, b, np = 0;
    round_shape(o, &D, &bq, &b);
    if (b <= 0 && o->strategy != STRAT_LEARNED) return 0;   /* (a learned prediction is kept, whatever the budget) */
    const long *ids = NULL;
    if (o->next_only) {
        long t = layer + 1 == L ? 0 : layer + 1;
        long m = o->f_lookahead ? pr_for(o, given, t, &ids) : -1;
        if (m >= 0) {                   /* dict.fromkeys(predictions[t])[:budget] */
            o->stamp++;
            for (long j = 0; j < m && np < b; j++) {
                int k = (int)(t * E + ids[j]);
                if (o->mark[k] == o->stamp) continue;
                o->mark[k] = o->stamp;
                o->props[np++] = k;
            }
            return np;
        }
        long h = o->f_history ? history_top(o, t, bq, o->hsort) : 0;
        for (long j = 0; j < h && np < b; j++) o->props[np++] = (int)(t * E + o->hsort[j]);
        return np;
    }
    /* per target its candidates, then round-robin by rank, distinct keys */
    long *cn = o->pcn;
    for (long d = 1; d <= D; d++) {
        long t = (layer + d) % L;
        int *dst = o->hsort + (d - 1) * bq;
        if (o->strategy == STRAT_AFFINITY) cn[d - 1] = o->f_affinity ? affinity_top(o, layer, ex, n, d, bq, dst) : 0;
        else if (o->strategy == STRAT_LEARNED && o->lrn) {   /* Learned.predict: its first bq */
            const int *got;
            long m = lrn_predict(o->lrn, layer, o->step, d, bq, &got);
            if (m < 0) return -1;
            long c = m < bq ? m : bq;
            for (long j = 0; j < c; j++) dst[j] = got[j];
            cn[d - 1] = c;
        } else {
            long m = o->strategy == STRAT_LOOKAHEAD ? pr_for(o, given, t, &ids) : -1;
            if (m >= 0) cn[d - 1] = -1 - m;    /* list(predictions[t]): every entry, read below */
            else cn[d - 1] = o->f_history ? history_top(o, t, bq, dst) : 0;
        }
    }
    o->stamp++;                                        /* 'seen' */
    for (long rank = 0; np < b; rank++) {
        int progressed = 0;
        for (long d = 1; d <= D && np < b; d++) {
            long t = (layer + d) % L, e, cnt = cn[d - 1];
            if (cnt < 0) {                              /* the caller's predictions for t */
                if (rank >= -1 - cnt) continue;
                pr_for(o, given, t, &ids);
                e = ids[rank];
            } else {
                if (rank >= cnt) continue;
                e = o->hsort[(d - 1) * bq + rank];
            }
            progressed = 1;
            int k = (int)(t * E + e);
            if (o->mark[k] == o->stamp) continue;
            o->mark[k] = o->stamp;
            o->props[np++] = k;
        }
        if (!progressed) break;
    }
    return np;
}

/* Runtime._issue: proposals -> PREFETCH loads (a victim is never a key in use or proposed in
 * the round); then the marks are the dispatch's keys again */
static void issue(Engine *o, long np, long layer, const long *ex, long n, Rec *r) {
    mark_inuse(o, layer, ex, n);
    for (long j = 0; j < np; j++) o->mark[o->props[j]] = o->stamp;
    for (long j = 0; j < np; j++) {
        int k = o->props[j];
        Cache *c = cache_of(o, k);
        Store *st = c->st;
        if (o->slot[k] >= 0) continue;
        if (c->nres > c->cap) continue;               /* over capacity: a deferred cut */
        if ((st->flags & ST_FILTERS) && !st->ops->admits(st, k)) continue;
        int slot, v = -1;
        if (c->nres >= c->cap || o->ftop == 0) {
            Exclude x = {o->mark, o->stamp, -1};
            v = st->ops->evict(st, &x, k);
            if (v < 0) continue;
            slot = o->slot[v];
            o->slot[v] = -1;
            c->nres--;
            rec_evict(r, v, slot);
            o->evictions++;
            gone_state(o, v);
        } else slot = o->fstack[--o->ftop];
        o->slot[k] = slot;
        c->nres++;
        if (!o->pinned[k]) {
            st->ops->insert(st, k, o->wdef);
            if (o->f_ttl) ttl_touch(o, k);
        }
        rec_load(r, k, slot, v, PK_PREFETCH);
        o->pf_loads++;
        o->pf[k] = 1;
    }
}

int prefetch(Engine *o, long layer, const long *ex, long n, int given, Rec *r) {
    long np = proposals(o, layer, ex, n, given);
    if (np < 0) return -1;
    if (np && o->tiers) tier_issue(o, np, layer, ex, n, r);
    else if (np) issue(o, np, layer, ex, n, r);
    mark_inuse(o, layer, ex, n);      /* the triggers spare only the keys in use */
    return 0;
}
