/* The engine's slots and caches beyond one access: keys leaving the device, TTL and memory
 * triggers, capacity changes, a switch of eviction rule, and the per-layer signal and
 * rebalancing (mpl/runtime/core.py: _gone, _ttl_sweep, _pressure, _evict_some, _flush,
 * _trim, _rebalance; cache.py: Cache.set_capacity, remove, evict_one, replace_store;
 * budgets.py: Signal). */
#include "engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "tiers.h"

/* ------------------------------------------------------------------ TTL order */
void ttl_unlink(Engine *o, int k) {
    if (!o->tin[k]) return;
    int p = o->tprv[k], n = o->tnxt[k];
    if (p >= 0) o->tnxt[p] = n; else o->thead = n;
    if (n >= 0) o->tprv[n] = p; else o->ttail = p;
    o->tin[k] = 0;
}

/* ttl[key] = stamp; move_to_end(key) */
void ttl_touch(Engine *o, int k) {
    ttl_unlink(o, k);
    o->tstamp[k] = ttl_stamp(o);
    o->tin[k] = 1;
    o->tnxt[k] = -1;
    o->tprv[k] = o->ttail;
    if (o->ttail >= 0) o->tnxt[o->ttail] = k; else o->thead = k;
    o->ttail = k;
}

/* ------------------------------------------------------------------ keys leaving */
/* what a key leaving the device forgets (Runtime._gone, past the evicted list and count) */
void gone_state(Engine *o, int k) {
    o->pf[k] = 0;
    if (o->f_ttl) ttl_unlink(o, k);
}

/* a resident key removed from cache c, its slot back to the pool (Cache.remove /
 * evict_one, then Runtime._gone) */
void drop_key(Engine *o, Cache *c, int k, Rec *r) {
    int slot = o->slot[k];
    o->fstack[o->ftop++] = slot;
    o->slot[k] = -1;
    c->nres--;
    rec_evict(r, k, slot);
    o->evictions++;
    gone_state(o, k);
    if (o->tiers) tier_gone(o, k, r);
}

/* Cache.evict_one(inuse): the store's victim among the keys not in use, removed; 0 when
 * there is none */
static int evict_one(Engine *o, Cache *c, Rec *r) {
    if (c->fixed) return 0;           /* a top tier whose residency is always */
    Exclude x = {o->mark, o->stamp, -1};
    int v = c->st->ops->evict(c->st, &x, -1);
    if (v < 0) return 0;
    drop_key(o, c, v, r);
    return 1;
}

/* Runtime._ttl_sweep: every key whose last access is ttl_n or more accesses (steps) ago and
 * that is not in use, oldest first */
void ttl_sweep(Engine *o, Rec *r) {
    int64_t limit = ttl_stamp(o) - o->ttl_n;
    int k = o->thead;
    while (k >= 0 && o->tstamp[k] <= limit) {
        int nxt = o->tnxt[k];
        if (o->mark[k] != o->stamp) {
            Cache *c = cache_of(o, k);
            c->st->ops->discard(c->st, k);
            drop_key(o, c, k, r);
        }
        k = nxt;
    }
}

/* Runtime._pressure: at or above the threshold (or forced by a trigger), evict down to the
 * headroom: each victim from the cache with the most evictable keys (ties: the lower layer),
 * else from any other that has one */
/* Runtime._used_bytes: the device bytes the caches hold */
static double used_bytes(const Engine *o) {
    return o->tiers ? tier_used_bytes(o) : (double)(o->pool_size - o->ftop) * o->expert_bytes;
}

void mem_pressure(Engine *o, Rec *r, int force) {
    if (!force && (isnan(o->mem_thr) || used_bytes(o) < o->mem_thr * o->mem_budget))
        return;
    double target = o->mem_headroom * o->mem_budget;
    while (used_bytes(o) > target) {
        Cache *best = NULL;
        long bn = 0;
        for (long i = 0; i < o->ncaches; i++) {
            long n = o->C[i].st->ops->len(o->C[i].st);
            if (n && (!best || n > bn)) { best = &o->C[i]; bn = n; }
        }
        if (!best) break;
        if (evict_one(o, best, r)) continue;
        int done = 0;
        for (long i = 0; i < o->ncaches && !done; i++) {
            Cache *c = &o->C[i];
            if (c == best || !c->st->ops->len(c->st)) continue;
            done = evict_one(o, c, r);
        }
        if (!done) break;
    }
}

/* Cache.set_capacity: the store resized, then a cut evicts down to it (sparing keys in use) */
void set_capacity(Engine *o, Cache *c, long cap, Rec *r) {
    c->cap = cap;
    c->st->ops->resize(c->st, cap);
    while (c->nres > cap)
        if (!evict_one(o, c, r)) break;
}

/* Runtime._trim: a cache above its capacity (a cut that met keys in use) finishes its cut */
void trim_cache(Engine *o, Cache *c, Rec *r) {
    set_capacity(o, c, c->cap, r);
}

/* Runtime._flush: every key not in use leaves, each cache's coldest first */
void flush_all(Engine *o, Rec *r) {
    for (long i = 0; i < o->ncaches; i++) {
        Cache *c = &o->C[i];
        long n = c->st->ops->len(c->st);
        if (!n || c->fixed) continue;     /* (a top tier whose residency is always stays) */
        int *keys = malloc(sizeof(int) * (size_t)n);
        if (!keys) { r->oom = 1; return; }
        c->st->ops->keys(c->st, keys);
        for (long j = 0; j < n; j++) {
            int k = keys[j];
            if (o->mark[k] == o->stamp) continue;
            c->st->ops->discard(c->st, k);
            drop_key(o, c, k, r);
        }
        free(keys);
    }
}

/* Cache.replace_store for every cache: a store of the new rule at the cache's capacity with
 * the parameters now, the residents migrated coldest first (inserted with weight 0). 0; -1
 * out of memory; -2 a rule the engine does not have (nothing changed) */
int switch_eviction(Engine *o, const char *rule) {
    for (long i = 0; i < o->ncaches; i++) {
        Cache *c = &o->C[i];
        Store *ns;
        int rc = store_make(&ns, rule, c->cap, c->st->klo, c->st->khi, o->L, o->U, o->S, o->sp);
        if (rc == -1) return -1;
        if (rc < 0) return -2;
        long n = c->st->ops->len(c->st);
        int *keys = n ? malloc(sizeof(int) * (size_t)n) : NULL;
        if (n && !keys) { store_free(ns); return -1; }
        if (n) c->st->ops->keys(c->st, keys);
        for (long j = 0; j < n; j++) ns->ops->insert(ns, keys[j], 0.0);
        free(keys);
        store_free(c->st);
        c->st = ns;
    }
    char *copy = malloc(strlen(rule) + 1);
    if (!copy) return -1;
    strcpy(copy, rule);
    free(o->rule);
    o->rule = copy;
    return 0;
}

/* ------------------------------------------------------------------ the signal */
/* the experts with a count, in the order the Python dict holds them (first count, after any
 * deletion), so that the entropy sums in that order */
static void s_link(Engine *o, long layer, int e) {
    long b = layer * o->E;
    o->sprev[b + e] = o->slast[layer];
    o->snext[b + e] = -1;
    if (o->slast[layer] >= 0) o->snext[b + o->slast[layer]] = e; else o->sfirst[layer] = e;
    o->slast[layer] = e;
    o->sn[layer]++;
}

static void s_unlink(Engine *o, long layer, int e) {
    long b = layer * o->E;
    int p = o->sprev[b + e], q = o->snext[b + e];
    if (p >= 0) o->snext[b + p] = q; else o->sfirst[layer] = q;
    if (q >= 0) o->sprev[b + q] = p; else o->slast[layer] = p;
    o->sn[layer]--;
}

/* Signal.observe(layer, experts) (its window's room reserved before the dispatch) */
void signal_observe(Engine *o, long layer, const long *ex, long n) {
    Ring *r = &o->sr;
    ring_push(r, layer, ex, n);
    int *cnt = o->scnt + layer * o->E;
    for (long j = 0; j < n; j++)
        if (!cnt[ex[j]]++) s_link(o, layer, (int)ex[j]);
    o->stotal[layer] += n;
    while (r->len[layer] > r->W) {
        long oi = ring_pop(r, layer);
        o->stotal[layer] -= r->rown[oi];
        for (int j = 0; j < r->rown[oi]; j++) {
            int e = r->rows[oi][j];
            if (cnt[e] > 0 && !--cnt[e]) s_unlink(o, layer, e);
        }
    }
}

/* Signal.weights(allocation) into o->rb_w */
static void signal_weights(Engine *o) {
    long L = o->L, E = o->E;
    int entropy = o->allocation == ALLOC_ENTROPY, freq = o->allocation == ALLOC_FREQUENCY;
    for (long l = 0; l < L; l++) {
        if (!o->f_signal || (!entropy && !freq)) { o->rb_w[l] = 1.0; continue; }
        double h = 0.0;
        if (!o->stotal[l]) { o->rb_w[l] = 0.0; continue; }
        if (freq) h = (double)o->sn[l];
        else {
            double t = (double)o->stotal[l];
            for (int e = o->sfirst[l]; e >= 0; e = o->snext[l * E + e]) {
                double p = (double)o->scnt[l * E + e] / t;
                h -= p * log(p);
            }
        }
        o->rb_w[l] = h;
    }
}

/* Runtime._rebalance: the split of the budget over the layers' weights (the bounds give way
 * to the budget), then shrinking caches first (their slots free), then growing ones */
int rebalance(Engine *o, Rec *r) {
    long L = o->L;
    signal_weights(o);
    long long lo = o->total_budget / L;
    if (o->min_cap < lo) lo = o->min_cap;
    long long hi = o->max_cap > lo ? o->max_cap : lo;
    /* (the weights are entropies or counts and lo * L <= budget: only memory can fail) */
    if (budget_allocate(o->rb_w, L, o->total_budget, lo, hi, o->rb_caps) != BUDGET_OK) return -1;
    for (long i = 0; i < L; i++)
        if (o->rb_caps[i] < o->C[i].cap) set_capacity(o, &o->C[i], (long)o->rb_caps[i], r);
    for (long i = 0; i < L; i++)
        if (o->rb_caps[i] >= o->C[i].cap) set_capacity(o, &o->C[i], (long)o->rb_caps[i], r);
    return 0;
}
