/* mpl.runtime._fast.LiveState: the general compiled live dispatch (included by _fast.c: it
 * uses the replay kernel's State, Cache and store functions, not a copy of them).
 *
 * LiveState holds the runtime's whole dispatch state in C while it "owns" it: the caches (residents, slots, the
 * eviction stores of the kernel), the slot pool's free stack, the counters, the prefetched
 * keys, the TTL order, the routing history and the monitor window with the adapt rules'
 * counters. The Python glue (mpl/runtime/fast.py) moves the state between the two
 * representations, exactly:
 *
 *   take (fast._live_take): the pure structures -> load(); the owned attributes are then
 *       deleted from the runtime's __dict__, so that any read of them reaches
 *       Runtime.__getattr__, which syncs first;
 *   sync (fast.live_sync): dump() -> the pure structures, put back into __dict__.
 *
 * A call the C path does not take (an unusual argument, predictions, an adapt rule about to
 * fire) syncs and runs the pure dispatch (or, for a firing rule, the pure monitor phase);
 * the next call takes the state again. */

enum { PK_DEMAND = 0, PK_BACKGROUND = 1, PK_PREFETCH = 2 };

/* metric codes of an adapt condition (monitor.METRIC_NAMES order) */
enum { M_HIT = 0, M_MISS = 1, M_EVICT = 2, M_PFACC = 3, M_XFER = 4, M_STALL = 5 };
/* comparisons */
enum { C_LT = 0, C_LE = 1, C_GT = 2, C_GE = 3, C_EQ = 4, C_NE = 5 };
/* units of "for N ..." */
enum { U_ACC = 0, U_STEPS = 1, U_TOKENS = 2 };

typedef struct {
    int metric, cmp, unit, rearm;   /* rearm: edge-triggered (not a pair's restoring half) */
    double value;
    long long n;
    /* state (core._Rule) */
    int armed;
    long long held;
    long long mark;     /* -1: None */
} LRule;

/* A window of the last W dispatches of each layer (their expert ids), as the pure History
 * and Signal keep it in a deque per layer: per layer a ring of rows with room for R of
 * them. R grows (doubling, up to W + 1) with what the window holds, never with W itself:
 * memory follows the dispatches seen, whatever window a policy names. */
typedef struct {
    long W, R;
    long *head, *len;                     /* per layer */
    int **rows;                           /* L * R rows (row i of layer l at l * R + i) */
    int *rown, *rowcap;
} Ring;

typedef struct {
    long long acc_index;   /* the access index the record is attributed to */
    long long ev, ld, pfl, pfu;
    double stall;
} MEvent;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *rt, *dict, *pure, *take, *sync, *observe;
    PyTypeObject *plan;
    Guard *guard;                         /* the runtime's lock (_guard.c) */
    Py_ssize_t off[8];
    int owns;
    /* in_call: a dispatch or a replay runs (the state is in use); glue: inside it, the call
     * to the Python glue that moves the state (take, sync). Outside the glue, load() and
     * a destructive dump() are refused while in_call: no Python code the dispatch calls
     * (a logging handler, a finalizer, a tick) can free or move the state under it. */
    int in_call, glue;
    Py_ssize_t dict_size;
    long L, E, K, ncaches, pool_size;
    State S;
    Cache *C;
    unsigned char *pinned;
    int per_layer, mode, f_ttl, f_weighted, prefetch_on, next_only, ttl_steps, mem_on;
    long long ttl_n;                      /* < 0: no sweep */
    double cpu_limit, mem_thr, mem_headroom, mem_budget, expert_bytes, wdef;
    long budget, lookahead;
    int f_rebalance, rb_guard;            /* per-layer rebalancing (its interval may be 0) */
    long long rb_interval;
    long *rb_caps;                        /* scratch: the capacities of a rebalance */
    PyObject *split;                      /* fast._live_split(rt): those capacities (Python) */
    /* the affinity table (prefetch.Affinity): per (distance, source layer) the row counts n
     * of each source expert and the transition counts to each target expert; per layer its
     * last dispatch (step, experts) */
    int has_aff, aff_predict;             /* the table is kept / the strategy reads it */
    int f_lookahead, strategy_la;         /* lookahead reachable / the strategy now */
    long aff_depth;
    double aff_thr;
    long long *aff_n, *aff_c;             /* D*L*E, D*L*E*E */
    unsigned char *aff_tab;               /* D*L: the (d, src) table exists */
    long long *aff_step;                  /* per layer the step of its last dispatch */
    unsigned char *aff_has;               /* per layer: a last dispatch is known */
    int *aff_last, *aff_lastn;            /* per layer its experts (E each), their number */
    double *aff_best;                     /* scratch: E */
    long long *aff_bc, *aff_bn;           /* scratch: E (the best fraction per target) */
    /* the learned predictor (prefetch.Learned): the runtime's _fast.Learned itself, a strong
     * reference held while the state is (from load to the next load or a destructive
     * dump); its state stays in it (Python code mutating it between dispatches changes
     * what the next one reads, as on the pure path), the dispatch calls its C cores */
    Learned *lrn;                         /* NULL: the policy observes no learned predictor */
    int lrn_predict;                      /* the strategy now is learned */
    GateArg *lrn_gates;                   /* scratch: L (the call's predictions, per layer) */
    /* the per-layer signal (budgets.Signal): per layer a ring of its last dispatches, the
     * counts per expert, their total, and the experts with a count in the order the Python
     * dict holds them (first count, after any deletion: its entropy sums in that order) */
    int has_sig;
    Ring sr;                              /* its window's rows */
    long *stotal, *sn;
    int *scnt, *sprev, *snext, *sfirst, *slast;
    /* counters */
    long long step, last_layer, accesses, evictions, demand, background, pf_loads, pf_useful,
        cpu_computes, streamed, dispatches;
    long long *l_acc, *l_hit;
    unsigned char *pf;
    long npf;
    /* routing history: per layer a ring of rows (the window's dispatches) */
    int has_hist;
    Ring hr;
    int *hcnt;                            /* L * E counts */
    long *hbk;                            /* per layer: len(bk) - 1 (the largest count reached) */
    int *hdelta, *htouched;               /* scratch: per expert the net change of a window move */
    /* monitor and adapt rules */
    int has_mon;
    long mwin, mlogint;
    unsigned char *ring;
    long long macc, mhits, mskipped;
    MEvent *events;                       /* a ring of event records */
    long ecap, ehead, elen;
    long long mev, mld, mpfl, mpfu;
    double mstall;
    long long seen[4];
    double seen_stall;
    int nrules;
    LRule *rules;
    PyObject *mlog, *mmetrics;            /* the monitor's log list, its logged metric names */
    /* scratch */
    PyObject **keys;                      /* key tuples, made on first use */
    int *props;
    long bq, bmax;                        /* min(budget, E): one target's candidates;
                                           * min(budget, D * E): the proposals of a dispatch */
    int *hsort;
    long *pcn;
    long *ex;                             /* the dispatch's experts (E) */
    double *wv;                           /* ... their weights (E) */
    unsigned char *hv;                    /* ... hit or not (E) */
    int *ord;                             /* ... the order they are served in (E): priority
                                           * routing serves the heaviest first */
    int priority;                         /* schedule.priority_routing, as the runtime has it */
    /* a dispatch recorded in C for a replay (the lean record: no Python object): per access
     * its slot / -1 CPU / -2 streamed (hit flags in hv), the loads (key, slot, victim or -1,
     * kind) and the evictions (key, slot); also what a Plan's timeline view is read into */
    long *lwh;
    int *lk, *lsl, *lvk;
    unsigned char *lkind;
    Py_ssize_t ln, lcap;
    int *xk, *xsl;
    Py_ssize_t xn, xcap;
    long llayer;                          /* the recorded dispatch's layer, accesses */
    Py_ssize_t lnacc;
    /* the dispatch's predictions, copied: per target layer its ids (pr_at[t] == pr_call:
     * given in this call) */
    long long pr_call, *pr_at;
    long *pr_off, *pr_len;
    int *pr_ids;
    Py_ssize_t pr_cap;
} LiveState;

static void ring_free(Ring *r, long L);

static PyObject *s_kind[3];
static PyObject *s_stall, *s_cpu_o, *s_stream_o, *s_one_o;

static int ls_traverse(LiveState *o, visitproc visit, void *arg) {
    Py_VISIT(o->rt); Py_VISIT(o->dict); Py_VISIT(o->pure); Py_VISIT(o->take); Py_VISIT(o->sync);
    Py_VISIT(o->observe); Py_VISIT((PyObject *)o->plan); Py_VISIT(o->mlog); Py_VISIT(o->mmetrics);
    Py_VISIT(o->split); Py_VISIT((PyObject *)o->guard); Py_VISIT((PyObject *)o->lrn);
    return 0;
}
static int ls_clear(LiveState *o) {
    Py_CLEAR(o->rt); Py_CLEAR(o->dict); Py_CLEAR(o->pure); Py_CLEAR(o->take); Py_CLEAR(o->sync);
    Py_CLEAR(o->observe); Py_CLEAR(o->plan); Py_CLEAR(o->mlog); Py_CLEAR(o->mmetrics);
    Py_CLEAR(o->split); Py_CLEAR(o->guard); Py_CLEAR(o->lrn);
    return 0;
}

static void ls_free_state(LiveState *o) {
    State *S = &o->S;
    free(S->slot); free(S->lid); free(S->prv); free(S->nxt); free(S->pos); free(S->hf); free(S->ht);
    free(S->freq); free(S->mark); free(S->lh); free(S->lt); free(S->ln); free(S->frontier);
    free(S->tprv); free(S->tnxt); free(S->tstamp); free(S->tin); free(S->fstack); free(S->side);
    free(S->kcrf); free(S->klast);
    memset(S, 0, sizeof *S);
    if (o->C) for (long i = 0; i < o->ncaches; i++) cache_free(&o->C[i]);
    free(o->C); o->C = NULL;
    free(o->pinned); o->pinned = NULL;
    free(o->l_acc); free(o->l_hit); free(o->pf); o->l_acc = o->l_hit = NULL; o->pf = NULL;
    ring_free(&o->hr, o->L);
    free(o->hcnt); free(o->hbk);
    o->hcnt = NULL; o->hbk = NULL;
    free(o->hdelta); free(o->htouched); o->hdelta = o->htouched = NULL;
    free(o->ring); o->ring = NULL;
    free(o->events); o->events = NULL;
    free(o->rules); o->rules = NULL;
    free(o->props); o->props = NULL;
    free(o->hsort); o->hsort = NULL;
    free(o->pcn); o->pcn = NULL;
    free(o->rb_caps); o->rb_caps = NULL;
    Py_CLEAR(o->split);
    ring_free(&o->sr, o->L);
    free(o->stotal);
    free(o->sn); free(o->scnt); free(o->sprev); free(o->snext); free(o->sfirst); free(o->slast);
    o->scnt = o->sprev = o->snext = o->sfirst = o->slast = NULL;
    o->stotal = o->sn = NULL;
    o->has_sig = 0;
    free(o->aff_n); free(o->aff_c); free(o->aff_tab); free(o->aff_step); free(o->aff_has);
    free(o->aff_last); free(o->aff_lastn); free(o->aff_best); free(o->aff_bc); free(o->aff_bn);
    o->aff_n = o->aff_c = o->aff_step = NULL; o->aff_tab = o->aff_has = NULL;
    o->aff_last = o->aff_lastn = NULL; o->aff_best = NULL; o->aff_bc = o->aff_bn = NULL;
    o->has_aff = o->aff_predict = 0;
    Py_CLEAR(o->lrn);                     /* (a predictor's dealloc runs no Python code) */
    o->lrn_predict = 0;
    free(o->lrn_gates); o->lrn_gates = NULL;
    Py_CLEAR(o->mlog); Py_CLEAR(o->mmetrics);
    o->owns = 0;
}

static void ls_dealloc(LiveState *o) {
    PyObject_GC_UnTrack(o);
    ls_clear(o);
    ls_free_state(o);
    if (o->keys) {
        for (long k = 0; k < o->K; k++) Py_XDECREF(o->keys[k]);
        free(o->keys);
    }
    free(o->ex); free(o->wv); free(o->hv); free(o->ord); free(o->lwh);
    free(o->lk); free(o->lsl); free(o->lvk); free(o->lkind); free(o->xk); free(o->xsl);
    free(o->pr_at); free(o->pr_off); free(o->pr_len); free(o->pr_ids);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

/* the key tuple (layer, expert) of key k: a borrowed reference (NULL on error) */
static PyObject *ls_key(LiveState *o, int k) {
    PyObject *t = o->keys[k];
    if (t) return t;
    t = Py_BuildValue("(ll)", (long)(k / o->E), (long)(k % o->E));
    if (!t) return NULL;
    PyObject_GC_UnTrack(t);
    o->keys[k] = t;
    return t;
}

static inline long long ls_stamp(LiveState *o) { return o->ttl_steps ? o->step : o->accesses; }

/* append to a list made with room (PyList_New(n) then size 0); grows through PyList_Append
 * beyond its allocation */
static int lappend(PyObject *lst, PyObject *item) {   /* steals item */
    if (!item) return -1;
    int r = PyList_Append(lst, item);
    Py_DECREF(item);
    return r;
}

/* room for one more entry in a lean record's arrays (ints; kind bytes when given) */
static int lrec_grow(Py_ssize_t n, Py_ssize_t *cap, int **a, int **b, int **c, unsigned char **d) {
    if (n < *cap) return 0;
    Py_ssize_t nc = *cap ? 2 * *cap : 64;
    if (nc > PY_SSIZE_T_MAX / (Py_ssize_t)sizeof(int)) { PyErr_NoMemory(); return -1; }
    int *na = realloc(*a, sizeof(int) * nc);
    if (na) *a = na;
    int *nb = na ? realloc(*b, sizeof(int) * nc) : NULL;
    if (nb) *b = nb;
    int *ncc = (nb && c) ? realloc(*c, sizeof(int) * nc) : NULL;
    if (ncc) *c = ncc;
    unsigned char *nd = (ncc && d) ? realloc(*d, nc) : NULL;
    if (nd) *d = nd;
    if (!na || !nb || (c && !ncc) || (d && !nd)) { PyErr_NoMemory(); return -1; }
    *cap = nc;
    return 0;
}

/* a load of the dispatch: into the Plan's list, or the lean record (loads NULL) */
static int ls_load_out(LiveState *o, PyObject *loads, int k, int slot, int v, int kind) {
    if (!loads) {
        if (lrec_grow(o->ln, &o->lcap, &o->lk, &o->lsl, &o->lvk, &o->lkind) < 0) return -1;
        o->lk[o->ln] = k; o->lsl[o->ln] = slot; o->lvk[o->ln] = v; o->lkind[o->ln] = (unsigned char)kind;
        o->ln++;
        return 0;
    }
    PyObject *key = ls_key(o, k), *sl = PyLong_FromLong(slot);
    PyObject *vk = v >= 0 ? ls_key(o, v) : Py_None;
    if (!key || !sl || !vk) { Py_XDECREF(sl); return -1; }
    PyObject *ld = PyTuple_Pack(4, key, sl, vk, s_kind[kind]);
    Py_DECREF(sl);
    if (!ld) return -1;
    PyObject_GC_UnTrack(ld);
    return lappend(loads, ld);
}

static int ls_evicted(LiveState *o, PyObject *evicted, int k, int slot) {
    if (!evicted) {                    /* the lean record */
        if (lrec_grow(o->xn, &o->xcap, &o->xk, &o->xsl, NULL, NULL) < 0) return -1;
        o->xk[o->xn] = k; o->xsl[o->xn] = slot;
        o->xn++;
        return 0;
    }
    PyObject *key = ls_key(o, k);
    if (!key) return -1;
    PyObject *sl = PyLong_FromLong(slot);
    if (!sl) return -1;
    PyObject *t = PyTuple_Pack(2, key, sl);
    Py_DECREF(sl);
    if (!t) return -1;
    PyObject_GC_UnTrack(t);
    return lappend(evicted, t);
}

/* Runtime._gone after the caller removed k from its cache and store: */
static inline void ls_gone_state(LiveState *o, int k) {
    o->evictions++;
    if (o->pf[k]) { o->pf[k] = 0; o->npf--; }
    if (o->f_ttl) t_unlink(&o->S, k);
}

/* ------------------------------------------------------------------ windows (Ring) */
static void ring_free(Ring *r, long L) {
    if (r->rows) for (long i = 0; i < L * r->R; i++) free(r->rows[i]);
    free(r->rows); free(r->rown); free(r->rowcap); free(r->head); free(r->len);
    memset(r, 0, sizeof *r);
}

/* room for R rows per layer (R <= W + 1); -1 with MemoryError */
static int ring_alloc(Ring *r, long L, long W, long R) {
    memset(r, 0, sizeof *r);
    r->W = W;
    r->R = R;
    if (R < 1 || R > (long)(PY_SSIZE_T_MAX / (Py_ssize_t)sizeof(int *)) / L) { PyErr_NoMemory(); return -1; }
    r->head = calloc(L, sizeof(long)); r->len = calloc(L, sizeof(long));
    r->rows = calloc(L * R, sizeof(int *)); r->rown = calloc(L * R, sizeof(int));
    r->rowcap = calloc(L * R, sizeof(int));
    if (!r->head || !r->len || !r->rows || !r->rown || !r->rowcap) { PyErr_NoMemory(); return -1; }
    return 0;
}

/* the room a window of W rows starts with, holding ``held`` rows already */
static long ring_start(long W, long held) {
    long cap = W < LONG_MAX ? W + 1 : LONG_MAX;
    long r = held + 1 > 8 ? held + 1 : 8;
    return r < cap ? r : cap;
}

static inline long ring_at(const Ring *r, long layer, long j) {   /* row j, oldest first */
    return layer * r->R + (r->head[layer] + j) % r->R;
}

/* twice the room (at most W + 1, or one more row: a window an adapt action shortened keeps
 * its rows until its next push), every layer's rows moved to the front in order */
static int ring_grow(Ring *r, long L) {
    if (r->R == LONG_MAX) { PyErr_NoMemory(); return -1; }
    long cap = r->W < LONG_MAX ? r->W + 1 : LONG_MAX;
    if (cap <= r->R) cap = r->R + 1;
    long nr = r->R > cap / 2 ? cap : 2 * r->R;
    Ring g;
    if (ring_alloc(&g, L, r->W, nr) < 0) { ring_free(&g, L); return -1; }
    for (long l = 0; l < L; l++) {
        for (long j = 0; j < r->len[l]; j++) {
            long oi = ring_at(r, l, j), ni = l * nr + j;
            g.rows[ni] = r->rows[oi]; g.rown[ni] = r->rown[oi]; g.rowcap[ni] = r->rowcap[oi];
            r->rows[oi] = NULL;
        }
        g.len[l] = r->len[l];
    }
    ring_free(r, L);       /* the rows not in use (none moved) */
    *r = g;
    return 0;
}

/* the row ex[0..n) enters layer's window at its end (room made first) */
static int ring_push(Ring *r, long L, long layer, const long *ex, Py_ssize_t n) {
    if (r->len[layer] == r->R && ring_grow(r, L) < 0) return -1;
    long ri = ring_at(r, layer, r->len[layer]);
    if (r->rowcap[ri] < n) {
        int *p = realloc(r->rows[ri], sizeof(int) * (n ? n : 1));
        if (!p) { PyErr_NoMemory(); return -1; }
        r->rows[ri] = p;
        r->rowcap[ri] = (int)n;
    }
    for (Py_ssize_t j = 0; j < n; j++) r->rows[ri][j] = (int)ex[j];
    r->rown[ri] = (int)n;
    r->len[layer]++;
    return 0;
}

/* the oldest row of layer leaves (its index, still readable until the next push) */
static long ring_pop(Ring *r, long layer) {
    long oi = layer * r->R + r->head[layer];
    r->head[layer] = (r->head[layer] + 1) % r->R;
    r->len[layer]--;
    return oi;
}

static int ll_item(PyObject *seq, Py_ssize_t i, long long *out);

/* a layer's rows from Python (a sequence of sequences of ids in 0..E), oldest first; at
 * most one expert id per distinct expert in a row (-1 with ValueError otherwise) */
static int ring_load_layer(Ring *r, long L, long layer, PyObject *rows, long E, const char *what) {
    Py_ssize_t m = PySequence_Size(rows);
    if (m < 0) return -1;
    for (Py_ssize_t j = 0; j < m; j++) {
        PyObject *row = PySequence_GetItem(rows, j);
        if (!row) return -1;
        PyObject *t = PySequence_Tuple(row);
        Py_DECREF(row);
        if (!t) return -1;
        Py_ssize_t rn = PyTuple_GET_SIZE(t);
        if (rn > E) { Py_DECREF(t); PyErr_Format(PyExc_ValueError, "live dispatch: load: a %s row longer than the experts", what); return -1; }
        long *buf = malloc(sizeof(long) * (rn ? rn : 1));
        if (!buf) { Py_DECREF(t); PyErr_NoMemory(); return -1; }
        for (Py_ssize_t q = 0; q < rn; q++) {
            long long e;
            if (ll_item(t, q, &e) < 0) { free(buf); Py_DECREF(t); return -1; }
            if (e < 0 || e >= E) { free(buf); Py_DECREF(t); PyErr_Format(PyExc_ValueError, "live dispatch: load: a %s row names an expert out of range", what); return -1; }
            buf[q] = (long)e;
        }
        Py_DECREF(t);
        int rc = ring_push(r, L, layer, buf, rn);
        free(buf);
        if (rc < 0) return -1;
    }
    return 0;
}

/* a layer's rows as a list of tuples, oldest first (NULL on error) */
static PyObject *ring_dump_layer(const Ring *r, long layer) {
    PyObject *lr = PyList_New(r->len[layer]);
    if (!lr) return NULL;
    for (long j = 0; j < r->len[layer]; j++) {
        long ri = ring_at(r, layer, j);
        PyObject *row = PyTuple_New(r->rown[ri]);
        if (!row) { Py_DECREF(lr); return NULL; }
        PyList_SET_ITEM(lr, j, row);
        for (int q = 0; q < r->rown[ri]; q++) {
            PyObject *x = PyLong_FromLong(r->rows[ri][q]);
            if (!x) { Py_DECREF(lr); return NULL; }
            PyTuple_SET_ITEM(row, q, x);
        }
    }
    return lr;
}

/* ------------------------------------------------------------------ history */
/* History.observe: the row enters the window and the rows beyond it leave; counts move by
 * the net change of each expert (in and out: none), and the largest count reached is that
 * of History's buckets (they grow one at a time, never past a final count) */
static int h_observe(LiveState *o, long layer, const long *ex, Py_ssize_t n) {
    Ring *r = &o->hr;
    if (ring_push(r, o->L, layer, ex, n) < 0) return -1;
    int *delta = o->hdelta, *touched = o->htouched;
    long nt = 0;
    for (Py_ssize_t j = 0; j < n; j++) {
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
    return 0;
}

/* History.top(layer, b): experts by count desc, then id; into out, their number */
static long h_top(LiveState *o, long layer, long b, int *out) {
    if (b <= 0) return 0;
    const int *cnt = o->hcnt + layer * o->E;
    long n = 0;
    for (long e = 0; e < o->E; e++) {
        int c = cnt[e];
        if (c <= 0) continue;
        /* insertion into the first min(n, b) places */
        long q = n < b ? n : b;
        if (q == b && !(c > cnt[out[b - 1]])) continue;   /* not better than the last kept */
        if (q == b) q = b - 1;
        while (q > 0 && cnt[out[q - 1]] < c) { out[q] = out[q - 1]; q--; }
        out[q] = (int)e;
        if (n < b) n++;
    }
    return n;
}

/* ------------------------------------------------------------------ monitor */
static void m_expire(LiveState *o) {
    long long lo = o->macc - o->mwin;
    while (o->elen && o->events[o->ehead].acc_index <= lo) {
        MEvent *x = &o->events[o->ehead];
        o->mev -= x->ev; o->mld -= x->ld; o->mpfl -= x->pfl; o->mpfu -= x->pfu;
        o->mstall -= x->stall;
        o->ehead = (o->ehead + 1) % o->ecap;
        o->elen--;
    }
    if (!o->elen) o->mstall = 0.0;
}

/* twice the room for event records (their order kept) */
static int m_grow(LiveState *o) {
    long nc = o->ecap * 2;
    MEvent *ne = malloc(sizeof(MEvent) * nc);
    if (!ne) { PyErr_NoMemory(); return -1; }
    for (long i = 0; i < o->elen; i++) ne[i] = o->events[(o->ehead + i) % o->ecap];
    free(o->events);
    o->events = ne; o->ecap = nc; o->ehead = 0;
    return 0;
}

static int m_push_events(LiveState *o, long long ev, long long ld, long long pfl, long long pfu,
                         double st) {
    if (ev || ld || pfl || pfu || st != 0.0) {
        if (o->elen == o->ecap && m_grow(o) < 0) return -1;
        MEvent *x = &o->events[(o->ehead + o->elen) % o->ecap];
        x->acc_index = o->macc; x->ev = ev; x->ld = ld; x->pfl = pfl; x->pfu = pfu; x->stall = st;
        o->elen++;
        o->mev += ev; o->mld += ld; o->mpfl += pfl; o->mpfu += pfu; o->mstall += st;
    }
    m_expire(o);
    return 0;
}

/* a metric's value (the generated _eval_rules' expressions); *none when it is None */
static double m_value(LiveState *o, int metric, int *none) {
    long long n = o->macc < o->mwin ? o->macc : o->mwin;
    *none = 0;
    switch (metric) {
    case M_HIT: return (double)o->mhits / (double)n;
    case M_MISS: return 1.0 - (double)o->mhits / (double)n;
    case M_EVICT: return (double)o->mev / (double)n;
    case M_XFER: return (double)o->mld / (double)n;
    case M_STALL: return o->mstall;
    default:
        if (o->mpfl > 0) {
            double a = (double)o->mpfu / (double)o->mpfl;
            return a < 1.0 ? a : 1.0;
        }
        *none = 1;
        return 0.0;
    }
}

static int cmp_holds(int cmp, double x, double v) {
    switch (cmp) {
    case C_LT: return x < v;
    case C_LE: return x <= v;
    case C_GT: return x > v;
    case C_GE: return x >= v;
    case C_EQ: return x == v;
    default: return x != v;
    }
}

/* one access's rule evaluation (the generated _eval_rules); returns the index of a rule
 * that fires now (its state not yet changed), -1 when none; dry: on a copy */
static int rules_eval(LiveState *o, LRule *rs, long long tokens) {
    for (int i = 0; i < o->nrules; i++) {
        LRule *r = &rs[i];
        int none;
        double x = m_value(o, r->metric, &none);
        if (!none && cmp_holds(r->cmp, x, r->value)) {
            if (r->armed) {                     /* core.Runtime._advance */
                if (r->unit == U_ACC) r->held += 1;
                else if (r->mark != o->step) {
                    if (r->mark != -1) r->held += r->unit == U_STEPS ? 1 : tokens;
                    r->mark = o->step;
                }
                if (r->held >= r->n) return i;
            }
        } else {
            r->held = 0;
            r->mark = -1;
            if (r->rearm) r->armed = 1;
        }
    }
    return -1;
}

/* ------------------------------------------------------------------ the phases */
/* mark the dispatch's keys in use (a new stamp) */
static void ls_mark_inuse(LiveState *o, long base, const long *ex, Py_ssize_t n) {
    State *S = &o->S;
    S->stamp++;
    for (Py_ssize_t j = 0; j < n; j++) S->mark[base + ex[j]] = S->stamp;
}

/* Affinity.observe(layer, step, experts) */
static void aff_observe(LiveState *o, long layer, const long *ex, Py_ssize_t n) {
    long L = o->L, E = o->E;
    long D = o->aff_depth < L ? o->aff_depth : L;
    for (long d = 1; d <= D; d++) {
        long src = layer - d;
        long long src_step = o->step;
        if (src < 0) { src += L; src_step = o->step - 1; }
        if (!o->aff_has[src] || o->aff_step[src] != src_step) continue;
        long t = (d - 1) * L + src;
        o->aff_tab[t] = 1;
        for (int j = 0; j < o->aff_lastn[src]; j++) {
            int e = o->aff_last[src * E + j];
            o->aff_n[t * E + e]++;
            long long *c = o->aff_c + (t * E + e) * E;
            for (Py_ssize_t q = 0; q < n; q++) c[ex[q]]++;
        }
    }
    o->aff_has[layer] = 1;
    o->aff_step[layer] = o->step;
    for (Py_ssize_t q = 0; q < n; q++) o->aff_last[layer * E + q] = (int)ex[q];
    o->aff_lastn[layer] = (int)n;
}

/* Affinity.predict(layer, experts, d): targets with P >= threshold, most probable first
 * (ties: lower id), at most b of them (round-robin by rank never reads further: the targets
 * differ, so every rank that progresses adds a key) */
static long aff_top(LiveState *o, long layer, const long *ex, Py_ssize_t n, long d, long b, int *out) {
    long L = o->L, E = o->E;
    long D = o->aff_depth < L ? o->aff_depth : L;
    if (d > D) return 0;                         /* no table at that distance */
    long t = (d - 1) * L + layer;
    if (!o->aff_tab[t]) return 0;
    double *best = o->aff_best;
    /* per target the largest P = count / row count over the dispatch's experts. While every
     * row count is below 2**24 two distinct fractions of such integers are further apart
     * than the doubles' rounding, so comparing them exactly as integers (no division) orders
     * them as their doubles do; the winner's double is computed once. Otherwise: doubles. */
    int exact = 1;
    for (Py_ssize_t q = 0; q < n && exact; q++) exact = o->aff_n[t * E + ex[q]] < (1LL << 24);
    if (exact) {
        long long *bc = o->aff_bc, *bn = o->aff_bn;
        for (long e2 = 0; e2 < E; e2++) { bc[e2] = 0; bn[e2] = 1; }
        for (Py_ssize_t q = 0; q < n; q++) {
            long long rn = o->aff_n[t * E + ex[q]];
            if (!rn) continue;
            const long long *c = o->aff_c + (t * E + ex[q]) * E;
            for (long e2 = 0; e2 < E; e2++) {
                long long x = c[e2];
                if (x * bn[e2] > bc[e2] * rn) { bc[e2] = x; bn[e2] = rn; }
            }
        }
        for (long e2 = 0; e2 < E; e2++) best[e2] = bc[e2] ? (double)bc[e2] / (double)bn[e2] : -1.0;
    } else {
        for (long e2 = 0; e2 < E; e2++) best[e2] = -1.0;
        for (Py_ssize_t q = 0; q < n; q++) {
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
    for (long e2 = 0; e2 < E; e2++) {
        double p = best[e2];
        if (!(p >= 0.0) || !(p >= o->aff_thr)) continue;
        long q = m < b ? m : b;
        if (q == b && !(p > best[out[b - 1]])) continue;
        if (q == b) q = b - 1;
        while (q > 0 && best[out[q - 1]] < p) { out[q] = out[q - 1]; q--; }
        out[q] = (int)e2;
        if (m < b) m++;
    }
    return m;
}

/* Runtime._check_predictions would take them unchanged: layers exact ints in range, each a
 * list or tuple of exact ints in range (1: copied into pr_*, as of this call); anything else
 * goes to the pure dispatch (0); -1: no memory for the copy */
static int preds_take(LiveState *o, PyObject *preds) {
    PyObject *key, *val;
    Py_ssize_t pos = 0, total = 0;
    o->pr_call++;
    while (PyDict_Next(preds, &pos, &key, &val)) {     /* (no Python code runs in the loop) */
        if (!PyLong_CheckExact(key)) return 0;
        int ovf;
        long l = PyLong_AsLongAndOverflow(key, &ovf);
        if (ovf || l < 0 || l >= o->L) { PyErr_Clear(); return 0; }
        if (!PyList_CheckExact(val) && !PyTuple_CheckExact(val)) return 0;
        Py_ssize_t m = PySequence_Fast_GET_SIZE(val);
        PyObject **items = PySequence_Fast_ITEMS(val);
        if (total + m > o->pr_cap) {
            Py_ssize_t nc = o->pr_cap ? o->pr_cap : 64;
            while (nc < total + m) {
                if (nc > PY_SSIZE_T_MAX / 2 / (Py_ssize_t)sizeof(int)) { PyErr_NoMemory(); return -1; }
                nc *= 2;
            }
            int *p = realloc(o->pr_ids, sizeof(int) * nc);
            if (!p) { PyErr_NoMemory(); return -1; }
            o->pr_ids = p;
            o->pr_cap = nc;
        }
        for (Py_ssize_t j = 0; j < m; j++) {
            if (!PyLong_CheckExact(items[j])) return 0;
            long e = PyLong_AsLongAndOverflow(items[j], &ovf);
            if (ovf || e < 0 || e >= o->E) { PyErr_Clear(); return 0; }
            o->pr_ids[total + j] = (int)e;
        }
        o->pr_at[l] = o->pr_call;
        o->pr_off[l] = (long)total;
        o->pr_len[l] = (long)m;
        total += m;
    }
    return 1;
}

/* this call's predictions for target layer t: their number (-1: none given for t), *ids */
static inline long pr_for(LiveState *o, int given, long t, const int **ids) {
    if (!given || o->pr_at[t] != o->pr_call) return -1;
    *ids = o->pr_ids + o->pr_off[t];
    return o->pr_len[t];
}

/* Runtime._proposals (history; lookahead: the caller's predictions for a target, else the
 * history; affinity) into o->props; their number. One layer ahead with the lookahead
 * strategy reachable (the generated code's shortcut), the predictions for the target are
 * read whatever the strategy is now, their duplicates dropped. ``given``: the call brought
 * predictions (pr_*). At most bmax proposals: min(budget, the distinct keys of the targets),
 * which is what the budget allows; one target gives at most bq = min(budget, E) (a learned
 * prediction's candidates are distinct: the round-robin never reads past rank bq). -1: an
 * exception (no memory for a learned prediction). */
static long ls_proposals(LiveState *o, long layer, const long *ex, Py_ssize_t n, int given) {
    long L = o->L, b = o->bmax, bq = o->bq, np = 0;
    State *S = &o->S;
    if (b <= 0 && !o->lrn_predict) return 0;   /* (a learned prediction is kept, whatever the budget) */
    const int *ids;
    if (o->next_only) {
        long t = layer + 1 == L ? 0 : layer + 1;
        long m = o->f_lookahead ? pr_for(o, given, t, &ids) : -1;
        if (m >= 0) {                   /* dict.fromkeys(predictions[t])[:budget] */
            S->stamp++;
            for (long j = 0; j < m && np < b; j++) {
                int k = (int)(t * o->E + ids[j]);
                if (S->mark[k] == S->stamp) continue;
                S->mark[k] = S->stamp;
                o->props[np++] = k;
            }
            return np;
        }
        long h = o->has_hist ? h_top(o, t, bq, o->hsort) : 0;
        for (long j = 0; j < h && np < b; j++) o->props[np++] = (int)(t * o->E + o->hsort[j]);
        return np;
    }
    /* per target its candidates, then round-robin by rank, distinct keys */
    long D = o->lookahead < L ? o->lookahead : L;
    long *cn = o->pcn;
    const int *plist[64];               /* a target's predictions (NULL: its candidates in hsort) */
    for (long d = 1; d <= D; d++) {
        long t = (layer + d) % L;
        plist[d - 1] = NULL;
        if (o->aff_predict) cn[d - 1] = aff_top(o, layer, ex, n, d, bq, o->hsort + (d - 1) * bq);
        else if (o->lrn_predict && o->lrn) {   /* Learned.predict(layer, step, d): its first bq */
            int m = lrn_predict_core(o->lrn, layer, o->step, d);
            if (m < 0) return -1;
            long c = m < bq ? m : bq;
            for (long j = 0; j < c; j++) o->hsort[(d - 1) * bq + j] = o->lrn->sc_pe[j].e;
            cn[d - 1] = c;
        } else {
            long m = o->strategy_la ? pr_for(o, given, t, &ids) : -1;
            if (m >= 0) {               /* list(predictions[t]): every entry, duplicates too */
                plist[d - 1] = ids;
                cn[d - 1] = m;
            } else cn[d - 1] = o->has_hist ? h_top(o, t, bq, o->hsort + (d - 1) * bq) : 0;
        }
    }
    S->stamp++;                                        /* 'seen' */
    for (long rank = 0; np < b; rank++) {
        int progressed = 0;
        for (long d = 1; d <= D && np < b; d++) {
            if (rank >= cn[d - 1]) continue;
            progressed = 1;
            long t = (layer + d) % L;
            long e = plist[d - 1] ? plist[d - 1][rank] : o->hsort[(d - 1) * bq + rank];
            int k = (int)(t * o->E + e);
            if (S->mark[k] == S->stamp) continue;
            S->mark[k] = S->stamp;
            o->props[np++] = k;
        }
        if (!progressed) break;
    }
    return np;
}

/* self.learned.observe(layer, self.step, experts, weights, predictions) on the held
 * predictor, from the call's C copies (the ids: distinct, in range, at most E; the weights:
 * exact floats, summed left to right as Learned.observe sums them; the predictions: exact
 * ints in range, per layer, their repeats dropped in the core). The step is within the
 * predictor's 2^62 (ls_dispatch sends any other to the pure dispatch). */
static int lrn_observe_live(LiveState *o, long layer, const long *ex, Py_ssize_t n, int has_w, int given) {
    Learned *q = o->lrn;
    for (Py_ssize_t i = 0; i < n; i++) q->arg_e[i] = (int)ex[i];
    int hasw = 0;
    double total = 0.0;
    if (has_w) {
        for (Py_ssize_t i = 0; i < n; i++) {
            q->arg_w[i] = o->wv[i];
            total += o->wv[i];
        }
        hasw = total > 0;
    }
    Py_ssize_t ng = 0;
    if (given) {
        for (long t = 0; t < o->L; t++) {
            if (o->pr_at[t] != o->pr_call) continue;
            GateArg *g = &o->lrn_gates[ng++];
            g->t = t;
            g->st = t > layer ? o->step : o->step + 1;
            g->n = o->pr_len[t];
            g->ids = o->pr_ids + o->pr_off[t];
        }
    }
    return lrn_observe_core(q, layer, o->step, n, hasw, total, o->lrn_gates, ng);
}

/* Runtime._issue: proposals -> PREFETCH loads (never evicting a key in use or proposed) */
static int ls_issue(LiveState *o, long np, long base, const long *ex, Py_ssize_t n,
                    PyObject *loads, PyObject *evicted) {
    State *S = &o->S;
    ls_mark_inuse(o, base, ex, n);
    for (long j = 0; j < np; j++) S->mark[o->props[j]] = S->stamp;
    for (long j = 0; j < np; j++) {
        int k = o->props[j];
        Cache *c = o->per_layer ? &o->C[k / o->E] : &o->C[0];
        if (S->slot[k] >= 0) continue;
        if (c->nres > c->cap) continue;              /* over capacity: a deferred cut */
        if (!st_admits(c, k)) continue;              /* the admission filter */
        int slot, v = -1;
        if (c->nres >= c->cap || S->ftop == 0) {
            v = st_evict(S, c, k);
            if (v < 0) continue;
            slot = S->slot[v];
            S->slot[v] = -1;
            c->nres--;
            if (ls_evicted(o, evicted, v, slot) < 0) return -1;
            ls_gone_state(o, v);
        } else slot = S->fstack[--S->ftop];
        S->slot[k] = slot;
        c->nres++;
        if (!o->pinned[k % o->E]) {
            st_insert(S, c, k, o->wdef);
            if (o->f_ttl) t_touch(S, k, ls_stamp(o));
        }
        if (ls_load_out(o, loads, k, slot, v, PK_PREFETCH) < 0) return -1;
        o->pf_loads++;
        if (!o->pf[k]) { o->pf[k] = 1; o->npf++; }
    }
    ls_mark_inuse(o, base, ex, n);                     /* the triggers spare only the keys in use */
    return 0;
}

/* remove resident k from cache c (Cache.remove / evict_one): the slot back to the pool */
static int ls_drop(LiveState *o, Cache *c, int k, PyObject *evicted) {
    State *S = &o->S;
    int slot = S->slot[k];
    S->fstack[S->ftop++] = slot;
    S->slot[k] = -1;
    c->nres--;
    if (ls_evicted(o, evicted, k, slot) < 0) return -1;
    ls_gone_state(o, k);
    return 0;
}

static int ls_ttl_sweep(LiveState *o, PyObject *evicted) {
    State *S = &o->S;
    long long limit = ls_stamp(o) - o->ttl_n;
    int k = S->thead;
    while (k >= 0 && S->tstamp[k] <= limit) {
        int nxt = S->tnxt[k];
        if (!excluded(S, k)) {
            Cache *c = o->per_layer ? &o->C[k / o->E] : &o->C[0];
            st_discard(S, c, k);
            if (ls_drop(o, c, k, evicted) < 0) return -1;
        }
        k = nxt;
    }
    return 0;
}

static int ls_pressure(LiveState *o, PyObject *evicted) {
    State *S = &o->S;
    double target = o->mem_headroom * o->mem_budget;
    while ((double)(o->pool_size - S->ftop) * o->expert_bytes > target) {
        Cache *best = NULL;
        for (long i = 0; i < o->ncaches; i++) {
            long nn = st_len(S, &o->C[i]);
            if (nn && (!best || nn > st_len(S, best))) best = &o->C[i];
        }
        if (!best) break;
        int v = st_evict(S, best, -1);
        Cache *from = best;
        if (v < 0) {
            for (long i = 0; i < o->ncaches && v < 0; i++) {
                if (&o->C[i] == best || !st_len(S, &o->C[i])) continue;
                v = st_evict(S, &o->C[i], -1);
                from = &o->C[i];
            }
        }
        if (v < 0) break;
        if (ls_drop(o, from, v, evicted) < 0) return -1;
    }
    return 0;
}

/* Cache.set_capacity: the store's resize (st_resize), then a cut evicts down to the
 * capacity, sparing the keys in use */
static int ls_set_capacity(LiveState *o, Cache *c, long cap, PyObject *evicted) {
    st_resize(&o->S, c, cap);
    while (c->nres > c->cap) {
        int v = st_evict(&o->S, c, -1);
        if (v < 0) break;
        if (ls_drop(o, c, v, evicted) < 0) return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ the signal */
static int ll_item(PyObject *seq, Py_ssize_t i, long long *out);

static void s_link(LiveState *o, long layer, int e) {     /* a first count: at the end */
    long E = o->E, b = layer * E;
    o->sprev[b + e] = o->slast[layer];
    o->snext[b + e] = -1;
    if (o->slast[layer] >= 0) o->snext[b + o->slast[layer]] = e; else o->sfirst[layer] = e;
    o->slast[layer] = e;
    o->sn[layer]++;
}

static void s_unlink(LiveState *o, long layer, int e) {   /* del cnt[e] */
    long E = o->E, b = layer * E;
    int p = o->sprev[b + e], q = o->snext[b + e];
    if (p >= 0) o->snext[b + p] = q; else o->sfirst[layer] = q;
    if (q >= 0) o->sprev[b + q] = p; else o->slast[layer] = p;
    o->sn[layer]--;
}

/* Signal.observe(layer, experts) */
static int s_observe(LiveState *o, long layer, const long *ex, Py_ssize_t n) {
    Ring *r = &o->sr;
    if (ring_push(r, o->L, layer, ex, n) < 0) return -1;
    int *cnt = o->scnt + layer * o->E;
    for (Py_ssize_t j = 0; j < n; j++) {
        if (!cnt[ex[j]]++) s_link(o, layer, (int)ex[j]);
    }
    o->stotal[layer] += n;
    while (r->len[layer] > r->W) {
        long oi = ring_pop(r, layer);
        o->stotal[layer] -= r->rown[oi];
        for (int j = 0; j < r->rown[oi]; j++) {
            int e = r->rows[oi][j];
            if (cnt[e] > 0 && !--cnt[e]) s_unlink(o, layer, e);
        }
    }
    return 0;
}

/* Signal.weights(runtime.allocation) as a list (NULL with an error set, or NULL: uniform) */
static PyObject *s_weights(LiveState *o) {
    if (!o->has_sig) return NULL;
    PyObject *alloc = PyDict_GetItemString(o->dict, "allocation");
    if (!alloc || !PyUnicode_Check(alloc)) return NULL;
    int entropy = PyUnicode_CompareWithASCIIString(alloc, "entropy") == 0;
    int freq = PyUnicode_CompareWithASCIIString(alloc, "frequency") == 0;
    if (!entropy && !freq) return NULL;
    PyObject *wl = PyList_New(o->L);
    if (!wl) return NULL;
    for (long l = 0; l < o->L; l++) {
        double h = 0.0;
        if (freq) h = (double)o->sn[l];
        else if (o->stotal[l]) {         /* Signal.entropy: in the dict's order */
            double t = (double)o->stotal[l];
            for (int e = o->sfirst[l]; e >= 0; e = o->snext[l * o->E + e]) {
                double p = (double)o->scnt[l * o->E + e] / t;
                h -= p * log(p);
            }
        }
        PyObject *x = PyFloat_FromDouble(h);
        if (!x) { Py_DECREF(wl); return NULL; }
        PyList_SET_ITEM(wl, l, x);
    }
    return wl;
}

/* the items of a list argument as a new tuple of exactly n items (a tuple cannot change
 * under a later call into Python; NULL with ValueError when the length is not n) */
static PyObject *as_tuple(PyObject *seq, Py_ssize_t n, const char *what) {
    PyObject *t = PySequence_Tuple(seq);
    if (!t) return NULL;
    if (n >= 0 && PyTuple_GET_SIZE(t) != n) {
        Py_DECREF(t);
        PyErr_Format(PyExc_ValueError, "live dispatch: load: %s has the wrong length", what);
        return NULL;
    }
    return t;
}

/* (window, [per layer [rows]], [per layer [(expert, count)] in dict order], [totals]) */
static int s_load(LiveState *o, PyObject *sig) {
    PyObject *rows_o, *cnts_o, *tots_o;
    long W, L = o->L, E = o->E;
    if (!PyArg_ParseTuple(sig, "lO!O!O!", &W, &PyList_Type, &rows_o, &PyList_Type, &cnts_o, &PyList_Type, &tots_o))
        return -1;
    if (W < 1) { PyErr_SetString(PyExc_ValueError, "live dispatch: load: bad signal window"); return -1; }
    PyObject *rows = as_tuple(rows_o, L, "the signal's rows"), *cnts = rows ? as_tuple(cnts_o, L, "the signal's counts") : NULL;
    PyObject *tots = cnts ? as_tuple(tots_o, L, "the signal's totals") : NULL;
    int rc = -1;
    if (!tots) goto out;
    long held = 0;
    for (long l = 0; l < L; l++) {
        Py_ssize_t m = PySequence_Size(PyTuple_GET_ITEM(rows, l));
        if (m < 0) goto out;
        if (m > held) held = m;
    }
    o->has_sig = 1;
    o->stotal = calloc(L, sizeof(long)); o->sn = calloc(L, sizeof(long));
    o->scnt = calloc(L * E, sizeof(int));
    o->sprev = malloc(sizeof(int) * L * E); o->snext = malloc(sizeof(int) * L * E);
    o->sfirst = malloc(sizeof(int) * L); o->slast = malloc(sizeof(int) * L);
    if (!o->stotal || !o->sn || !o->scnt || !o->sprev || !o->snext || !o->sfirst || !o->slast) { PyErr_NoMemory(); goto out; }
    if (ring_alloc(&o->sr, L, W, ring_start(W, held)) < 0) goto out;
    for (long l = 0; l < L; l++) o->sfirst[l] = o->slast[l] = -1;
    for (long l = 0; l < L; l++) {
        if (ring_load_layer(&o->sr, L, l, PyTuple_GET_ITEM(rows, l), E, "signal") < 0) goto out;
        PyObject *lc = PySequence_Tuple(PyTuple_GET_ITEM(cnts, l));
        if (!lc) goto out;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(lc); j++) {
            long e, c;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(lc, j), "ll", &e, &c)) { Py_DECREF(lc); goto out; }
            if (e < 0 || e >= E || c < 1 || c > INT_MAX || o->scnt[l * E + e]) {
                Py_DECREF(lc);
                PyErr_SetString(PyExc_ValueError, "live dispatch: load: bad signal");
                goto out;
            }
            o->scnt[l * E + e] = (int)c;
            s_link(o, l, (int)e);
        }
        Py_DECREF(lc);
        long long t;
        if (ll_item(tots, l, &t) < 0) goto out;
        o->stotal[l] = (long)t;
    }
    rc = 0;
out:
    Py_XDECREF(rows); Py_XDECREF(cnts); Py_XDECREF(tots);
    return rc;
}

static PyObject *s_dump(LiveState *o) {
    long L = o->L, E = o->E;
    PyObject *rows = PyList_New(L), *cnts = PyList_New(L), *tots = PyList_New(L);
    if (!rows || !cnts || !tots) goto bad;
    for (long l = 0; l < L; l++) {
        PyObject *lr = ring_dump_layer(&o->sr, l);
        if (!lr) goto bad;
        PyList_SET_ITEM(rows, l, lr);
        PyObject *lc = PyList_New(0);
        if (!lc) goto bad;
        PyList_SET_ITEM(cnts, l, lc);
        PyObject *t = PyLong_FromLong(o->stotal[l]);
        if (!t) goto bad;
        PyList_SET_ITEM(tots, l, t);
        for (int e = o->sfirst[l]; e >= 0; e = o->snext[l * E + e])
            if (lappend(lc, Py_BuildValue("(ii)", e, o->scnt[l * E + e])) < 0) goto bad;
    }
    return Py_BuildValue("(NNN)", rows, cnts, tots);
bad:
    Py_XDECREF(rows); Py_XDECREF(cnts); Py_XDECREF(tots);
    return NULL;
}

/* Runtime._rebalance with the split of fast._live_split (rb_caps); shrink first,
 * then grow (and finish the cuts of caches still above their capacity) */
static int ls_rebalance(LiveState *o, PyObject *evicted) {
    for (long i = 0; i < o->ncaches; i++)
        if (o->rb_caps[i] < o->C[i].cap && ls_set_capacity(o, &o->C[i], o->rb_caps[i], evicted) < 0) return -1;
    for (long i = 0; i < o->ncaches; i++)
        if (o->rb_caps[i] >= o->C[i].cap && ls_set_capacity(o, &o->C[i], o->rb_caps[i], evicted) < 0) return -1;
    return 0;
}

/* Runtime._trim: the dispatch's cache is over its capacity (a cut that met keys in use) */
static int ls_trim(LiveState *o, Cache *c, PyObject *evicted) {
    while (c->nres > c->cap) {
        int v = st_evict(&o->S, c, -1);
        if (v < 0) break;
        if (ls_drop(o, c, v, evicted) < 0) return -1;
    }
    return 0;
}

/* the monitor's log record at this access (Monitor.value of each logged metric) */
static PyObject *s_access, *s_debug, *s_fmt, *g_log, *g_metric_names[6];
static int ls_log(LiveState *o) {
    PyObject *mlog = o->mlog, *metrics = o->mmetrics;
    PyObject *rec = Py_BuildValue("{s:L,s:L}", "access", o->macc + o->mskipped, "step", o->step);
    if (!rec) return -1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(metrics); i++) {
        PyObject *name = PyTuple_GET_ITEM(metrics, i);
        int code = -1;
        for (int j = 0; j < 6; j++)
            if (PyUnicode_Compare(name, g_metric_names[j]) == 0) { code = j; break; }
        if (code < 0) { Py_DECREF(rec); PyErr_SetString(PyExc_ValueError, "live dispatch: unknown metric"); return -1; }
        int none;
        double x = m_value(o, code, &none);
        PyObject *v = none ? (Py_INCREF(Py_None), Py_None) : PyFloat_FromDouble(x);
        if (!v || PyDict_SetItem(rec, name, v) < 0) { Py_XDECREF(v); Py_DECREF(rec); return -1; }
        Py_DECREF(v);
    }
    if (PyList_Append(mlog, rec) < 0) { Py_DECREF(rec); return -1; }
    PyObject *r = PyObject_CallMethodObjArgs(g_log, s_debug, s_fmt, rec, NULL);
    Py_DECREF(rec);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

/* a call to the glue that moves the state (take, sync): load() and dump() are allowed
 * meanwhile; whatever it did, the caller reads the state afresh afterwards (o->owns, o->S,
 * o->C: nothing derived from them is kept across it) */
static int ls_glue(LiveState *o, PyObject *fn) {
    int g = o->glue;
    o->glue = 1;
    PyObject *r = PyObject_CallOneArg(fn, o->rt);
    o->glue = g;
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

/* a sync (the state back into the pure structures) through the glue */
static int ls_sync(LiveState *o) {
    return o->owns ? ls_glue(o, o->sync) : 0;
}

static PyObject *ls_pure(LiveState *o, PyObject *const *args, size_t nargsf, PyObject *kw) {
    if (ls_sync(o) < 0) return NULL;
    return PyObject_Vectorcall(o->pure, args, nargsf, kw);
}

/* a list made in C for the Plan, hidden from the garbage collector (and so from
 * gc.get_objects / get_referrers in a finalizer) until it is handed to Python */
static PyObject *hidden_list(Py_ssize_t n) {
    PyObject *l = PyList_New(n);
    if (l) PyObject_GC_UnTrack(l);
    return l;
}

static void shown(PyObject *l) {
    if (l && !PyObject_GC_IsTracked(l)) PyObject_GC_Track(l);
}

/* the accesses of the monitor phase (Runtime._observe's loop); 1: a rule fires at one of
 * them (stopped there), 0: none, -1 error. do_log: write the log records (else the first
 * access that logs is noted in *log_at). */
static int ls_monitor_loop(LiveState *o, Py_ssize_t n, long long tokens, double stall_now,
                           int do_log, long *log_at) {
    long long loads = o->demand + o->background + o->pf_loads;
    long long ev = o->evictions - o->seen[0], ld = loads - o->seen[1];
    long long pfl = o->pf_loads - o->seen[2], pfu = o->pf_useful - o->seen[3];
    double st = stall_now - o->seen_stall;
    for (Py_ssize_t j = 0; j < n; j++) {
        long i = (long)(o->macc % o->mwin);
        int v = o->hv[j];
        o->mhits += v - o->ring[i];
        o->ring[i] = (unsigned char)v;
        o->macc++;
        if (o->elen && o->events[o->ehead].acc_index <= o->macc - o->mwin) m_expire(o);
        if (j == n - 1) {
            if (m_push_events(o, ev, ld, pfl, pfu, st) < 0) return -1;
            o->seen[0] = o->evictions; o->seen[1] = loads; o->seen[2] = o->pf_loads;
            o->seen[3] = o->pf_useful; o->seen_stall = stall_now;
        }
        if (o->nrules && rules_eval(o, o->rules, tokens) >= 0) return 1;
        if ((o->macc + o->mskipped) % o->mlogint == 0) {
            if (!do_log) { if (*log_at < 0) *log_at = (long)j; }
            else if (ls_log(o) < 0) return -1;
        }
    }
    return 0;
}

/* the monitor phase in C; 1: a rule fires during it (everything the phase changed is
 * undone: the caller runs the pure phase), 0 done, -1 error. A phase that writes a log
 * record runs twice: once to find whether a rule fires (no side effect outside the state),
 * then, undone, again with the records. */
static int ls_observe(LiveState *o, Py_ssize_t n, long long tokens) {
    /* room for the phase's record (growing changes nothing) */
    if (o->elen == o->ecap && m_grow(o) < 0) return -1;
    double stall_now;
    {
        PyObject *sv = PyDict_GetItemWithError(o->dict, s_stall);
        if (!sv) { if (!PyErr_Occurred()) PyErr_SetObject(PyExc_AttributeError, s_stall); return -1; }
        Py_INCREF(sv);                 /* (a float subclass's __float__ may replace it) */
        stall_now = PyFloat_AsDouble(sv);
        Py_DECREF(sv);
        if (stall_now == -1.0 && PyErr_Occurred()) return -1;
    }
    long long s_macc = o->macc, s_mhits = o->mhits, s_mev = o->mev, s_mld = o->mld,
        s_mpfl = o->mpfl, s_mpfu = o->mpfu, s_seen[4];
    double s_mstall = o->mstall, s_seen_stall = o->seen_stall;
    long s_ehead = o->ehead, s_elen = o->elen;
    memcpy(s_seen, o->seen, sizeof s_seen);
    LRule rbuf[16];
    LRule *saved = o->nrules <= 16 ? rbuf : malloc(sizeof(LRule) * o->nrules);
    long nring = n < o->mwin ? (long)n : o->mwin;
    unsigned char rsave_buf[256];
    unsigned char *rsave = nring <= 256 ? rsave_buf : malloc(nring);
    if (!saved || !rsave) {
        if (saved && saved != rbuf) free(saved);
        if (rsave && rsave != rsave_buf) free(rsave);
        PyErr_NoMemory();
        return -1;
    }
    memcpy(saved, o->rules, sizeof(LRule) * o->nrules);
    for (long j = 0; j < nring; j++) rsave[j] = o->ring[(s_macc + j) % o->mwin];
    long log_at = -1;
    int r = ls_monitor_loop(o, n, tokens, stall_now, 0, &log_at);
    if (r == 1 || (r == 0 && log_at >= 0)) {     /* undo */
        for (long j = nring - 1; j >= 0; j--) o->ring[(s_macc + j) % o->mwin] = rsave[j];
        o->macc = s_macc; o->mhits = s_mhits; o->mev = s_mev; o->mld = s_mld; o->mpfl = s_mpfl;
        o->mpfu = s_mpfu; o->mstall = s_mstall; o->seen_stall = s_seen_stall;
        o->ehead = s_ehead; o->elen = s_elen;
        memcpy(o->seen, s_seen, sizeof s_seen);
        memcpy(o->rules, saved, sizeof(LRule) * o->nrules);
        if (r == 0) r = ls_monitor_loop(o, n, tokens, stall_now, 1, &log_at);
    }
    if (saved != rbuf) free(saved);
    if (rsave != rsave_buf) free(rsave);
    return r;
}

/* one dispatch (the generated dispatch in C); the caller marked the call (in_call) */
/* the slot (>= 0), CPU (-1) or stream (-2) of access i: into the Plan's list, or the lean
 * record (where NULL) */
static inline int out_where(LiveState *o, PyObject *where, Py_ssize_t i, long v) {
    if (!where) { o->lwh[i] = v; return 0; }
    PyObject *x;
    if (v >= 0) { x = PyLong_FromLong(v); if (!x) return -1; }
    else { x = v == -1 ? s_cpu_o : s_stream_o; Py_INCREF(x); }
    PyList_SET_ITEM(where, i, x);
    return 0;
}

/* the lean record of a dispatch of n accesses as the Plan's lists (new references; the
 * lists are hidden from the collector, as the dispatch makes them) */
static int ls_lists(LiveState *o, Py_ssize_t n, PyObject **where, PyObject **hit, PyObject **loads,
                    PyObject **evicted) {
    *where = hidden_list(n); *hit = hidden_list(n); *loads = hidden_list(0); *evicted = hidden_list(0);
    if (!*where || !*hit || !*loads || !*evicted) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *b = o->hv[i] ? Py_True : Py_False;
        Py_INCREF(b);
        PyList_SET_ITEM(*hit, i, b);
        if (out_where(o, *where, i, o->lwh[i]) < 0) return -1;
    }
    for (Py_ssize_t j = 0; j < o->ln; j++)
        if (ls_load_out(o, *loads, o->lk[j], o->lsl[j], o->lvk[j], o->lkind[j]) < 0) return -1;
    for (Py_ssize_t j = 0; j < o->xn; j++)
        if (ls_evicted(o, *evicted, o->xk[j], o->xsl[j]) < 0) return -1;
    return 0;
}

/* the Plan of the dispatch in the lean record (its layer and experts as the call gave them) */
static PyObject *ls_lean_plan(LiveState *o, PyObject *layer_o, PyObject *experts) {
    PyObject *where, *hit, *loads, *evicted, *result = NULL;
    if (ls_lists(o, o->lnacc, &where, &hit, &loads, &evicted) < 0) goto out;
    PyObject *stepo = PyLong_FromLongLong(o->step);
    if (!stepo) goto out;
    result = o->plan->tp_alloc(o->plan, 0);
    if (!result) { Py_DECREF(stepo); goto out; }
    shown(where); shown(hit); shown(loads); shown(evicted);
    PyObject *vals[8] = {stepo, layer_o, experts, where, hit, loads, evicted, Py_False};
    for (int i = 0; i < 8; i++) {
        if (i != 0) Py_INCREF(vals[i]);
        *(PyObject **)((char *)result + o->off[i]) = vals[i];
    }
out:
    Py_XDECREF(where); Py_XDECREF(hit); Py_XDECREF(loads); Py_XDECREF(evicted);
    return result;
}

/* one dispatch (the generated dispatch in C); the caller marked the call (in_call). lean
 * (a replay): the outcome is recorded in C (lwh, hv, the loads and evictions) and None is
 * returned instead of a Plan, unless the dispatch ended on the pure path (a Plan then) */
static PyObject *ls_dispatch(LiveState *o, PyObject *const *args, size_t nargsf, PyObject *kw, int lean) {
    if (!o->pure || !o->dict) { PyErr_SetString(PyExc_RuntimeError, "live dispatch: cleared"); return NULL; }
    Args A;
    int given = 0;
    if (!parse_args(args, nargsf, kw, o->L, o->E, o->ex, o->wv, o->E, 1, &A) || A.tokens > (1L << 53))
        return ls_pure(o, args, nargsf, kw);    /* (token counts a double holds exactly: the hybrid test) */
    if (A.preds) {
        int t = preds_take(o, A.preds);
        if (t < 0) return NULL;
        if (!t) return ls_pure(o, args, nargsf, kw);
        given = 1;
    }
    if (o->owns && PyDict_GET_SIZE(o->dict) != o->dict_size) {
        /* an attribute was set on the runtime meanwhile: the pure structures decide again */
        if (ls_sync(o) < 0) return NULL;
    }
    if (!o->owns) {
        if (ls_glue(o, o->take) < 0) return NULL;
        if (!o->owns) return PyObject_Vectorcall(o->pure, args, nargsf, kw);   /* not covered now */
    }
    if (o->lrn) {    /* a step beyond the predictor's 2^62: the pure dispatch (its error) */
        long long ns = A.step_given >= 0 ? A.step_given : o->step;
        int inc = A.step_given < 0 && A.layer <= o->last_layer;
        if (ns < -LRN_STEP_MAX || ns > LRN_STEP_MAX - inc) return ls_pure(o, args, nargsf, kw);
    }
    /* from here on no Python code can change the state: load() and dump() are refused
     * outside the glue, and the ids, weights and predictions are C copies */
    State *S = &o->S;
    const long *ex = o->ex;
    Py_ssize_t n = A.n;
    long layer = A.layer;
    {   /* a frequency window takes at most one entry per access: room first, before any
         * state changes */
        Cache *fc = o->per_layer ? &o->C[layer] : &o->C[0];
        if (fc->rule == R_SEG) fc = fc->sub[0];
        if (fc->rule == R_FT && ft_reserve(fc, layer, (long)n) < 0) { PyErr_NoMemory(); return NULL; }
    }
    if (A.step_given >= 0) o->step = A.step_given;
    else if (layer <= o->last_layer) o->step++;
    o->last_layer = layer;
    Cache *c = o->per_layer ? &o->C[layer] : &o->C[0];
    st_begin(c, o->step, layer);
    long base = layer * o->E;
    const double *wv = o->f_weighted && A.has_w ? o->wv : NULL;
    PyObject *where = NULL, *hit = NULL, *loads = NULL, *evicted = NULL, *result = NULL;
    if (lean) o->ln = o->xn = 0;
    else {
        where = hidden_list(n); hit = hidden_list(n); loads = hidden_list(0); evicted = hidden_list(0);
        if (!where || !hit || !loads || !evicted) goto fail;
    }
    ls_mark_inuse(o, base, ex, n);
    long long nd = 0, nst = 0, nbg = 0, ncpu = 0, nhit = 0;
    int first_miss = 1, to_cpu = 0;
    /* the order of service: router order, or with priority routing and weights the
     * heaviest first, equal weights in router order (the generated dispatch's
     * sorted(range(n), key=weights.__getitem__, reverse=True), which is stable) */
    const int *ord = NULL;
    if (o->priority && A.has_w && n > 1) {
        int *q = o->ord;
        for (Py_ssize_t j = 0; j < n; j++) {
            Py_ssize_t at = j;
            double wj = o->wv[j];
            while (at > 0 && o->wv[q[at - 1]] < wj) { q[at] = q[at - 1]; at--; }
            q[at] = (int)j;
        }
        ord = q;
    }
    for (Py_ssize_t ii = 0; ii < n; ii++) {
        Py_ssize_t i = ord ? ord[ii] : ii;
        int e = (int)ex[i];
        int k = (int)(base + e);
        double w = wv ? wv[i] : o->wdef;
        if (o->f_ttl) o->accesses++;
        if (S->slot[k] >= 0) {
            if (out_where(o, where, i, S->slot[k]) < 0) goto fail;
            if (hit) { Py_INCREF(Py_True); PyList_SET_ITEM(hit, i, Py_True); }
            o->hv[i] = 1;
            nhit++;
            if (!o->pinned[e]) {
                st_hit(S, c, k, w);
                if (o->f_ttl) t_touch(S, k, ls_stamp(o));
            }
            if (o->pf[k]) { o->pf[k] = 0; o->npf--; o->pf_useful++; }
            continue;
        }
        if (hit) { Py_INCREF(Py_False); PyList_SET_ITEM(hit, i, Py_False); }
        o->hv[i] = 0;
        if (first_miss) {
            first_miss = 0;
            to_cpu = o->mode == 1 || (o->mode == 2 && (double)A.tokens < o->cpu_limit);
        }
        if (!o->pinned[e] && needs_miss(c)) st_miss(S, c, k);
        if (to_cpu) {
            out_where(o, where, i, -1);
            ncpu++;
        }
        if (!st_admits(c, k)) {          /* frequency_threshold's admission filter */
            if (!to_cpu) {
                out_where(o, where, i, -2);
                nst++;
            }
            continue;
        }
        int slot, v = -1;
        if (c->nres >= c->cap || S->ftop == 0) {
            v = st_evict(S, c, k);
            if (v < 0) {
                if (!to_cpu) {
                    out_where(o, where, i, -2);
                    nst++;
                }
                continue;
            }
            slot = S->slot[v];
            S->slot[v] = -1;
            c->nres--;
            if (ls_evicted(o, evicted, v, slot) < 0) goto fail;
            o->evictions++;
            if (o->pf[v]) { o->pf[v] = 0; o->npf--; }
            if (o->f_ttl) t_unlink(S, v);
        } else slot = S->fstack[--S->ftop];
        S->slot[k] = slot;
        c->nres++;
        if (!o->pinned[e]) {
            st_insert(S, c, k, w);
            if (o->f_ttl) t_touch(S, k, ls_stamp(o));
        }
        if (ls_load_out(o, loads, k, slot, v, to_cpu ? PK_BACKGROUND : PK_DEMAND) < 0) goto fail;
        if (to_cpu) nbg++;
        else {
            nd++;
            if (out_where(o, where, i, slot) < 0) goto fail;
        }
    }
    o->demand += nd; o->streamed += nst; o->background += nbg; o->cpu_computes += ncpu;
    o->l_acc[layer] += n;
    o->l_hit[layer] += nhit;
    if (o->f_rebalance) o->dispatches++;
    if (o->has_hist && h_observe(o, layer, ex, n) < 0) goto fail;
    if (o->has_aff) aff_observe(o, layer, ex, n);
    if (o->lrn && lrn_observe_live(o, layer, ex, n, A.has_w, given) < 0) goto fail;
    if (o->has_sig && s_observe(o, layer, ex, n) < 0) goto fail;
    if (o->prefetch_on) {
        long np = ls_proposals(o, layer, ex, n, given);
        if (np < 0) goto fail;
        if (np) { if (ls_issue(o, np, base, ex, n, loads, evicted) < 0) goto fail; }
        else if (!o->next_only) ls_mark_inuse(o, base, ex, n);   /* the proposals' marks */
    }
    if (o->f_ttl && o->ttl_n >= 0 && ls_ttl_sweep(o, evicted) < 0) goto fail;
    if (o->mem_on && (double)(o->pool_size - S->ftop) * o->expert_bytes >= o->mem_thr * o->mem_budget &&
            ls_pressure(o, evicted) < 0) goto fail;
    int tail = -1;   /* the pure tail of the dispatch from: 1 the rebalance, 0 the monitor */
    if (o->f_rebalance && (o->rb_interval == 0 ? !o->rb_guard : o->dispatches % o->rb_interval == 0)) {
        /* the split (the signal's weights, water-filling) from Python, the cuts here; a split
         * the pure path refuses (its error) and an interval of 0 take the pure _rebalance */
        PyObject *wl = o->rb_interval ? s_weights(o) : NULL;
        if (!wl && o->rb_interval && PyErr_Occurred()) goto fail;
        PyObject *caps = o->rb_interval ? PyObject_CallFunctionObjArgs(o->split, o->rt, wl ? wl : Py_None, NULL) : NULL;
        Py_XDECREF(wl);
        if (!caps && o->rb_interval) goto fail;
        if (!caps || caps == Py_None || !PyList_CheckExact(caps) || PyList_GET_SIZE(caps) != o->ncaches) tail = 1;
        else {
            /* the capacities, read in one pass before any of them is used (the list is ours
             * only until the next call into Python) */
            for (long i = 0; i < o->ncaches; i++) {
                PyObject *it = PyList_GET_ITEM(caps, i);
                long long v = PyLong_CheckExact(it) ? PyLong_AsLongLong(it) : -1;
                if (v < 0) {
                    Py_DECREF(caps);
                    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "live dispatch: a rebalance gave a capacity that is not an int >= 0");
                    goto fail;
                }
                o->rb_caps[i] = v > LONG_MAX ? LONG_MAX : (long)v;
            }
            Py_DECREF(caps);
            if (ls_rebalance(o, evicted) < 0) goto fail;
            caps = NULL;
        }
        Py_XDECREF(caps);
    }
    if (tail < 0 && o->has_mon && n) {
        int r = ls_observe(o, n, A.tokens);
        if (r < 0) goto fail;
        if (r == 1) tail = 0;   /* an adapt rule fires: the pure monitor phase */
    }
    if (tail >= 0) {     /* synced, the rest of the dispatch on the pure path (trim included) */
        if (lean) {        /* the pure tail takes Python lists: the record becomes them */
            if (ls_lists(o, n, &where, &hit, &loads, &evicted) < 0) goto fail;
            lean = 0;
        }
        if (ls_sync(o) < 0) goto fail;
        shown(hit); shown(evicted);
        PyObject *x = PyObject_CallFunction(o->observe, "OOOOOOO", o->rt, tail ? Py_True : Py_False,
                                            hit, A.tokens_o ? A.tokens_o : s_one_o, A.layer_o,
                                            A.experts, evicted);
        if (!x) goto fail;
        Py_DECREF(x);
        goto plan;
    }
    if (c->nres > c->cap && ls_trim(o, c, evicted) < 0) goto fail;
plan:
    if (lean) {            /* the record stays in C: the replay's timeline reads it */
        o->llayer = layer;
        o->lnacc = n;
        Py_INCREF(Py_None);
        result = Py_None;
        goto fail;
    }
    {
        PyObject *stepo = PyLong_FromLongLong(o->step);
        if (!stepo) goto fail;
        result = o->plan->tp_alloc(o->plan, 0);
        if (!result) { Py_DECREF(stepo); goto fail; }
        shown(where); shown(hit); shown(loads); shown(evicted);
        PyObject *vals[8] = {stepo, A.layer_o, A.experts, where, hit, loads, evicted, Py_False};
        for (int i = 0; i < 8; i++) {
            if (i != 0) Py_INCREF(vals[i]);
            *(PyObject **)((char *)result + o->off[i]) = vals[i];
        }
    }
fail:
    /* (a list PyList_New made has NULL items until set: list_dealloc skips them) */
    Py_XDECREF(where); Py_XDECREF(hit); Py_XDECREF(loads); Py_XDECREF(evicted);
    return result;
}

/* the busy refusal of a dispatch or replay into a LiveState already in a call (only a
 * hostile guard.release() lets another thread get here) */
static int ls_enter(LiveState *o, const char *what) {
    if (o->in_call) {
        PyErr_Format(o->guard->busy_error ? o->guard->busy_error : PyExc_RuntimeError,
                     "%s while the compiled live dispatch is already in a call", what);
        return -1;
    }
    o->in_call = 1;
    return 0;
}

/* rt.dispatch(...): the runtime's guard held for the call (mpl.runtime.guard) */
static PyObject *ls_call(LiveState *o, PyObject *const *args, size_t nargsf, PyObject *kw) {
    if (guard_begin(o->guard, "a dispatch") < 0) return NULL;
    PyObject *r = NULL;
    if (ls_enter(o, "a dispatch") == 0) {
        r = ls_dispatch(o, args, nargsf, kw, 0);
        o->in_call = 0;
    }
    guard_end(o->guard);
    return r;
}

/* hits(...): rt.dispatch(...) for a caller that needs no Plan when every access hit and the
 * dispatch moved nothing (the offload engine on a pool that holds the model): True then,
 * else the Plan dispatch() returns. The dispatch runs as a replay's does (its outcome in
 * the lean record), so the state, the counters and any Plan are dispatch()'s; the record
 * is read before the call ends (no Python code runs in between) */
static PyObject *ls_hits_call(LiveState *o, PyObject *const *args, size_t nargsf, PyObject *kw) {
    if (guard_begin(o->guard, "a dispatch") < 0) return NULL;
    PyObject *r = NULL;
    if (ls_enter(o, "a dispatch") == 0) {
        r = ls_dispatch(o, args, nargsf, kw, 1);
        if (r == Py_None) {      /* the lean record (its arguments were parsed: args[0], [1]) */
            int all = o->ln == 0 && o->xn == 0;
            for (Py_ssize_t i = 0; all && i < o->lnacc; i++)
                all = o->hv[i] != 0;
            Py_DECREF(r);
            if (all) {
                Py_INCREF(Py_True);
                r = Py_True;
            } else r = ls_lean_plan(o, args[0], args[1]);
        }
        o->in_call = 0;
    }
    guard_end(o->guard);
    return r;
}

/* held_call(...): the dispatch for a replay loop that holds the guard already (busy) */
static PyObject *ls_held_call(LiveState *o, PyObject *const *args, size_t nargsf, PyObject *kw) {
    if (!guard_mine(o->guard) || !o->guard->busy) {
        PyErr_SetString(PyExc_RuntimeError, "live dispatch: held_call() outside a replay holding the runtime's guard");
        return NULL;
    }
    if (ls_enter(o, "a dispatch") < 0) return NULL;
    PyObject *r = ls_dispatch(o, args, nargsf, kw, 0);
    o->in_call = 0;
    return r;
}

/* ------------------------------------------------------------------ load / dump */
static int ll_item(PyObject *seq, Py_ssize_t i, long long *out) {
    PyObject *v = PySequence_GetItem(seq, i);
    if (!v) return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* ------------------------------------------------------------------ a store from Python */
/* The store's state in its class's dump() format (mpl/runtime/eviction*.py, keys as ints)
 * into cache c, checked: every key in [lo, hi) (the cache's own), a resident key once in
 * one store and never pinned, a ghost never resident; -1 with ValueError otherwise. */
typedef struct { LiveState *o; Cache *c; long lo, hi; } SLoad;

static int sl_bad(const char *what) {
    PyErr_Format(PyExc_ValueError, "live dispatch: load: %s", what);
    return -1;
}

static int sl_key(SLoad *x, PyObject *item, int ghost, int *out) {
    long k = PyLong_AsLong(item);
    if (k == -1 && PyErr_Occurred()) return -1;
    State *S = &x->o->S;
    if (k < x->lo || k >= x->hi) return sl_bad("a store key out of its cache");
    if (S->lid[k] >= 0 || S->pos[k] >= 0 || S->side[k]) return sl_bad("a key in a store twice");
    if (ghost ? S->slot[k] >= 0 : (S->slot[k] < 0 || x->o->pinned[k % x->o->E]))
        return sl_bad(ghost ? "a ghost key that is resident" : "a store key that is not an unpinned resident");
    *out = (int)k;
    return 0;
}

/* the keys of a list argument into list l, oldest first */
static int sl_list(SLoad *x, PyObject *keys, int l, int ghost) {
    PyObject *t = PySequence_Tuple(keys);
    if (!t) return -1;
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(t); j++) {
        int k;
        if (sl_key(x, PyTuple_GET_ITEM(t, j), ghost, &k) < 0) { Py_DECREF(t); return -1; }
        l_push(&x->o->S, l, k);
    }
    Py_DECREF(t);
    return 0;
}

/* [(key, value, tick)]: into the heap (l < 0) or list l */
static int sl_valued(SLoad *x, PyObject *ents, int l) {
    PyObject *t = PySequence_Tuple(ents);
    if (!t) return -1;
    State *S = &x->o->S;
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(t); j++) {
        PyObject *kk;
        double f;
        long long tick;
        int k;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(t, j), "OdL", &kk, &f, &tick) || sl_key(x, kk, 0, &k) < 0) {
            Py_DECREF(t);
            return -1;
        }
        S->hf[k] = f;
        S->ht[k] = tick;
        if (l < 0) {
            if (x->c->hn >= x->o->S.K) { Py_DECREF(t); return sl_bad("a heap larger than the keys"); }
            h_push(S, x->c, k);
        } else l_push(S, l, k);
    }
    Py_DECREF(t);
    return 0;
}

static int st_load(SLoad *x, PyObject *data);

/* a CRF table [(key, crf, last use)] (keys of the cache, resident or not) */
static int sl_table(SLoad *x, PyObject *table_o) {
    State *S = &x->o->S;
    PyObject *t = PySequence_Tuple(table_o);
    if (!t) return -1;
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(t); j++) {
        long k;
        double crf;
        long long last;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(t, j), "ldL", &k, &crf, &last)) { Py_DECREF(t); return -1; }
        if (k < x->lo || k >= x->hi || last < 0 || S->klast[k] >= 0) { Py_DECREF(t); return sl_bad("a CRF table entry out of place"); }
        S->kcrf[k] = crf;
        S->klast[k] = last;
    }
    Py_DECREF(t);
    return 0;
}

static int st_load_sub(LiveState *o, Cache *sub, PyObject *data, long lo, long hi, unsigned char side) {
    SLoad y = {o, sub, lo, hi};
    if (st_load(&y, data) < 0) return -1;
    State *S = &o->S;
    for (long k = lo; k < hi; k++)     /* this side's keys (none had a side before) */
        if (!S->side[k] && S->slot[k] >= 0 && (S->lid[k] >= 0 || S->pos[k] >= 0))
            S->side[k] = side;
    return 0;
}

static int st_load(SLoad *x, PyObject *data) {
    Cache *c = x->c;
    State *S = &x->o->S;
    switch (c->rule) {
    case R_LRU:
        return sl_list(x, data, c->lbase, 0);
    case R_LFU: {
        PyObject *ents;
        if (!PyArg_ParseTuple(data, "OdLLdL", &ents, &c->inc, &c->tick, &c->clock, &c->decay, &c->interval)) return -1;
        return sl_valued(x, ents, -1);
    }
    case R_SCORE: {
        PyObject *ents;
        if (!PyArg_ParseTuple(data, "OLd", &ents, &c->tick, &c->alpha)) return -1;
        return sl_valued(x, ents, -1);
    }
    case R_FT: {
        PyObject *wins_o, *last_o;
        if (!PyArg_ParseTuple(data, "OOLdl", &wins_o, &last_o, &c->tick, &c->thr, &c->W)) return -1;
        if (c->W < 1) return sl_bad("a frequency window below 1");
        PyObject *wins = PySequence_Tuple(wins_o);
        if (!wins) return -1;
        long L = x->o->L, E = x->o->E;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(wins); j++) {
            long layer;
            PyObject *w_o;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(wins, j), "lO", &layer, &w_o)) { Py_DECREF(wins); return -1; }
            if (layer < 0 || layer >= L || (x->o->per_layer && layer * E != x->lo) || c->wlen[layer]) {
                Py_DECREF(wins);
                return sl_bad("a frequency window of another layer");
            }
            PyObject *w = PySequence_Tuple(w_o);
            if (!w) { Py_DECREF(wins); return -1; }
            Py_ssize_t n = PyTuple_GET_SIZE(w);
            if (ft_room(c, layer, (long)n) < 0) {
                Py_DECREF(w); Py_DECREF(wins);
                PyErr_NoMemory();
                return -1;
            }
            for (Py_ssize_t q = 0; q < n; q++) {
                long e = PyLong_AsLong(PyTuple_GET_ITEM(w, q));
                if (e == -1 && PyErr_Occurred()) { Py_DECREF(w); Py_DECREF(wins); return -1; }
                if (e < 0 || e >= E) { Py_DECREF(w); Py_DECREF(wins); return sl_bad("a frequency window entry out of range"); }
                c->wr[layer][q] = (int)e;
                c->cnt[layer * E + e]++;
            }
            c->wlen[layer] = (long)n;
            c->whead[layer] = 0;
            Py_DECREF(w);
        }
        Py_DECREF(wins);
        PyObject *last = PySequence_Tuple(last_o);
        if (!last) return -1;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(last); j++) {
            PyObject *kk;
            long long tick;
            int k;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(last, j), "OL", &kk, &tick) || sl_key(x, kk, 0, &k) < 0) {
                Py_DECREF(last);
                return -1;
            }
            S->ht[k] = tick;
            l_push(S, c->lbase, k);
        }
        Py_DECREF(last);
        return 0;
    }
    case R_ARC: {
        PyObject *t1, *t2, *b1, *b2;
        if (!PyArg_ParseTuple(data, "dOOOO", &c->p, &t1, &t2, &b1, &b2)) return -1;
        if (!(c->p >= 0.0)) return sl_bad("a negative ARC target");
        return sl_list(x, t1, T1(c), 0) < 0 || sl_list(x, t2, T2(c), 0) < 0 ||
               sl_list(x, b1, B1(c), 1) < 0 || sl_list(x, b2, B2(c), 1) < 0 ? -1 : 0;
    }
    case R_S3FIFO: {
        PyObject *sq, *mq, *gq, *fr_o;
        if (!PyArg_ParseTuple(data, "OOOO", &sq, &mq, &gq, &fr_o)) return -1;
        if (sl_list(x, sq, SQ(c), 0) < 0 || sl_list(x, mq, MQ(c), 0) < 0 || sl_list(x, gq, GQ(c), 1) < 0) return -1;
        PyObject *fr = PySequence_Tuple(fr_o);
        if (!fr) return -1;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(fr); j++) {
            long k;
            int f;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(fr, j), "li", &k, &f)) { Py_DECREF(fr); return -1; }
            if (k < x->lo || k >= x->hi || (S->lid[k] != SQ(c) && S->lid[k] != MQ(c)) || f < 0 || f > 3) {
                Py_DECREF(fr);
                return sl_bad("an S3-FIFO frequency out of place");
            }
            S->freq[k] = (unsigned char)f;
        }
        Py_DECREF(fr);
        return 0;
    }
    case R_LFRU: {
        PyObject *pr, *un;
        if (!PyArg_ParseTuple(data, "OOLLdL", &pr, &un, &c->tick, &c->clock, &c->decay, &c->interval)) return -1;
        return sl_list(x, pr, PRIV(c), 0) < 0 || sl_valued(x, un, UNPRIV(c)) < 0 ? -1 : 0;
    }
    case R_SEG: {
        PyObject *a, *b;
        if (!PyArg_ParseTuple(data, "OO", &a, &b)) return -1;
        return st_load_sub(x->o, c->sub[0], a, x->lo, x->hi, 1) < 0 ||
               st_load_sub(x->o, c->sub[1], b, x->lo, x->hi, 2) < 0 ? -1 : 0;
    }
    case R_CRF: {
        PyObject *table, *res_o;
        if (!PyArg_ParseTuple(data, "OOLLd", &table, &res_o, &c->now, &c->tick, &c->h)) return -1;
        if (!(c->h > 0.0) || sl_table(x, table) < 0) return c->h > 0.0 ? -1 : sl_bad("a CRF half-life not above 0");
        PyObject *res = PySequence_Tuple(res_o);
        if (!res) return -1;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(res); j++) {
            PyObject *kk;
            long long seq;
            int k;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(res, j), "OL", &kk, &seq) || sl_key(x, kk, 0, &k) < 0) {
                Py_DECREF(res);
                return -1;
            }
            if (c->hn >= S->K) { Py_DECREF(res); return sl_bad("a heap larger than the keys"); }
            S->ht[k] = seq;
            crf_g(S, c, k);
            h_push(S, c, k);
        }
        Py_DECREF(res);
        return 0;
    }
    case R_CLASSLRU: {
        PyObject *table, *lists_o, *stamps_o;
        if (!PyArg_ParseTuple(data, "OOOLd", &table, &lists_o, &stamps_o, &c->now, &c->h)) return -1;
        if (!(c->h > 0.0)) return sl_bad("a CRF half-life not above 0");
        if (sl_table(x, table) < 0) return -1;
        PyObject *lists = PySequence_Tuple(lists_o);
        if (!lists) return -1;
        if (PyTuple_GET_SIZE(lists) != 8) { Py_DECREF(lists); return sl_bad("ClassLRU has 8 classes"); }
        for (int cl = 0; cl < 8; cl++) {
            if (sl_list(x, PyTuple_GET_ITEM(lists, cl), CLS(c, cl), 0) < 0) { Py_DECREF(lists); return -1; }
            for (int k = S->lh[CLS(c, cl)]; k >= 0; k = S->nxt[k]) S->freq[k] = (unsigned char)cl;
        }
        Py_DECREF(lists);
        PyObject *stamps = PySequence_Tuple(stamps_o);
        if (!stamps) return -1;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(stamps); j++) {
            long k;
            long long st;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(stamps, j), "lL", &k, &st)) { Py_DECREF(stamps); return -1; }
            if (k < x->lo || k >= x->hi || !cls_has(c, S, (int)k)) { Py_DECREF(stamps); return sl_bad("a ClassLRU stamp of a key it does not hold"); }
            S->ht[k] = st;
            S->hf[k] = (double)++c->tick;      /* the admission order, as listed */
        }
        Py_DECREF(stamps);
        return 0;
    }
    case R_VLFRU: {
        PyObject *ents_o;
        if (!PyArg_ParseTuple(data, "OL", &ents_o, &c->tick)) return -1;
        PyObject *ents = PySequence_Tuple(ents_o);
        if (!ents) return -1;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(ents); j++) {
            PyObject *kk;
            long long f, last;
            int k;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(ents, j), "OLL", &kk, &f, &last) || sl_key(x, kk, 0, &k) < 0) {
                Py_DECREF(ents);
                return -1;
            }
            if (f < 1 || f > (1LL << 53) || last > c->tick) { Py_DECREF(ents); return sl_bad("a vllm_lfru entry out of range"); }
            S->hf[k] = (double)f;
            S->ht[k] = last;
            l_push(S, c->lbase, k);
        }
        Py_DECREF(ents);
        return 0;
    }
    case R_FAR: {
        PyObject *layers_o;
        if (!PyArg_ParseTuple(data, "Ol", &layers_o, &c->cur)) return -1;
        if (c->cur < 0 || c->cur >= x->o->L) return sl_bad("a layer out of range");
        PyObject *layers = PySequence_Tuple(layers_o);
        if (!layers) return -1;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(layers); j++) {
            long layer;
            PyObject *keys;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(layers, j), "lO", &layer, &keys)) { Py_DECREF(layers); return -1; }
            if (layer < x->lo / x->o->E || layer >= (x->hi + x->o->E - 1) / x->o->E) { Py_DECREF(layers); return sl_bad("a layer out of range"); }
            int l = c->fspan == 1 ? c->fbase : c->fbase + (int)layer;
            SLoad y = {x->o, c, layer * x->o->E, (layer + 1) * x->o->E};   /* its own layer's keys */
            if (sl_list(&y, keys, l, 0) < 0) { Py_DECREF(layers); return -1; }
        }
        Py_DECREF(layers);
        return 0;
    }
    }
    return sl_bad("a store it does not hold");
}

static const char *load_doc =
"load(cfg, caches, free, pins, counters, l_acc, l_hit, pf, ttl, hist, mon, rules): take the\n"
"runtime's state (see mpl/runtime/fast.py, _live_take, the only caller).";

static PyObject *ls_load(LiveState *o, PyObject *args) {
    if (o->in_call && !o->glue) {
        PyErr_SetString(PyExc_RuntimeError, "live dispatch: load() from inside a dispatch (the state is in use)");
        return NULL;
    }
    PyObject *cfg, *caches_o, *free_o, *pins_o, *ctr, *lacc_o, *lhit_o, *pf_o, *ttl_o, *hist, *mon, *rules_o;
    if (!PyArg_ParseTuple(args, "O!O!O!OO!O!O!O!O!OOO!", &PyTuple_Type, &cfg, &PyList_Type, &caches_o,
                          &PyList_Type, &free_o, &pins_o, &PyTuple_Type, &ctr, &PyList_Type, &lacc_o,
                          &PyList_Type, &lhit_o, &PyList_Type, &pf_o, &PyList_Type, &ttl_o, &hist, &mon,
                          &PyList_Type, &rules_o))
        return NULL;
    ls_free_state(o);
    long long ttl_n;
    PyObject *split, *aff, *sig, *lrn;
    int lrn_pred;
    if (!PyArg_ParseTuple(cfg, "pipppppLddddddlllppLOOOppOpp", &o->per_layer, &o->mode, &o->f_ttl, &o->f_weighted,
                          &o->prefetch_on, &o->next_only, &o->ttl_steps, &ttl_n, &o->mem_thr,
                          &o->mem_headroom, &o->mem_budget, &o->expert_bytes, &o->wdef, &o->cpu_limit,
                          &o->budget, &o->lookahead, &o->pool_size, &o->f_rebalance, &o->rb_guard,
                          &o->rb_interval, &split, &aff, &sig, &o->f_lookahead, &o->strategy_la,
                          &lrn, &lrn_pred, &o->priority))
        return NULL;
    /* the learned predictor: the runtime's own _fast.Learned of this model's shape (its
     * cores index its tables by layer and expert) */
    if (lrn != Py_None && (!Py_IS_TYPE(lrn, &LearnedType) || ((Learned *)lrn)->L != o->L ||
                           ((Learned *)lrn)->E != o->E)) {
        PyErr_SetString(PyExc_ValueError, "live dispatch: load: the learned predictor must be a "
                        "_fast.Learned of the runtime's layers and experts");
        return NULL;
    }
    if (lrn_pred && lrn == Py_None) {
        PyErr_SetString(PyExc_ValueError, "live dispatch: load: the learned strategy without a predictor");
        return NULL;
    }
    long L = o->L, E = o->E, K = o->K;
    if (o->mode < 0 || o->mode > 2 || ttl_n < -1 || o->lookahead < 1 || o->lookahead > 64 ||
            o->pool_size < 0 || o->pool_size > K || o->rb_interval < 0) {
        PyErr_SetString(PyExc_ValueError, "live dispatch: load: bad configuration");
        return NULL;
    }
    o->ttl_n = ttl_n;
    o->mem_on = o->mem_thr >= 0.0;
    Py_INCREF(split); o->split = split;
    if (lrn != Py_None) {
        if (!(o->lrn_gates = malloc(sizeof(GateArg) * (size_t)o->L))) return PyErr_NoMemory();
        Py_INCREF(lrn);
        o->lrn = (Learned *)lrn;
    }
    o->lrn_predict = lrn_pred;
    o->ncaches = o->per_layer ? L : 1;
    /* the arguments' items as tuples: nothing a conversion below calls can change them */
    PyObject *caches = NULL, *freel = NULL, *lacc = NULL, *lhit = NULL, *pfl = NULL, *ttll = NULL, *rules = NULL;
    unsigned char *used = NULL;
    if (!(caches = as_tuple(caches_o, o->ncaches, "caches")) || !(freel = as_tuple(free_o, -1, "free")) ||
        !(lacc = as_tuple(lacc_o, L, "l_acc")) || !(lhit = as_tuple(lhit_o, L, "l_hit")) ||
        !(pfl = as_tuple(pf_o, -1, "pf")) || !(ttll = as_tuple(ttl_o, -1, "ttl")) ||
        !(rules = as_tuple(rules_o, -1, "rules")))
        goto bad;
    State *S = &o->S;
    S->K = K;
    long nl = lists_needed(o->ncaches, L);
    long D = o->lookahead < L ? o->lookahead : L;
    /* proposals: at most budget, and never more distinct keys than D target layers hold */
    long b = o->budget > 0 ? o->budget : 0;
    o->bq = b < E ? b : E;
    o->bmax = b < D * E ? b : D * E;
    S->slot = malloc(sizeof(int) * K); S->lid = malloc(sizeof(int) * K);
    S->prv = malloc(sizeof(int) * K); S->nxt = malloc(sizeof(int) * K);
    S->pos = malloc(sizeof(int) * K); S->hf = calloc(K, sizeof(double));
    S->ht = calloc(K, sizeof(long long)); S->freq = calloc(K, 1);
    S->mark = calloc(K, sizeof(long long));
    S->lh = malloc(sizeof(int) * nl); S->lt = malloc(sizeof(int) * nl); S->ln = calloc(nl, sizeof(long));
    S->frontier = malloc(sizeof(int) * (K + 4));
    S->tprv = malloc(sizeof(int) * K); S->tnxt = malloc(sizeof(int) * K);
    S->tstamp = calloc(K, sizeof(long long)); S->tin = calloc(K, 1);
    S->side = calloc(K, 1);
    S->fstack = malloc(sizeof(int) * (o->pool_size > 0 ? o->pool_size : 1));
    S->thead = S->ttail = -1;
    o->C = calloc(o->ncaches, sizeof(Cache));
    o->pinned = calloc(E, 1);
    o->l_acc = calloc(L, sizeof(long long)); o->l_hit = calloc(L, sizeof(long long));
    o->pf = calloc(K, 1);
    o->props = malloc(sizeof(int) * (o->bmax + 1));
    o->hsort = malloc(sizeof(int) * (D * o->bq + 1));
    o->pcn = malloc(sizeof(long) * (D > 0 ? D : 1));
    used = calloc(o->pool_size > 0 ? o->pool_size : 1, 1);
    if (!S->slot || !S->lid || !S->prv || !S->nxt || !S->pos || !S->hf || !S->ht || !S->freq || !S->mark ||
        !S->lh || !S->lt || !S->ln || !S->frontier || !S->tprv || !S->tnxt || !S->tstamp || !S->tin ||
        !S->side || !S->fstack || !o->C || !o->pinned || !o->l_acc || !o->l_hit || !o->pf || !o->props ||
        !o->hsort || !o->pcn || !used) {
        PyErr_NoMemory();
        goto bad;
    }
    for (long k = 0; k < K; k++) { S->slot[k] = -1; S->lid[k] = -1; S->pos[k] = -1; }
    for (long l = 0; l < nl; l++) S->lh[l] = S->lt[l] = -1;
    if (pins_o != Py_None) {
        Py_buffer pb;
        if (PyObject_GetBuffer(pins_o, &pb, PyBUF_SIMPLE) < 0) goto bad;
        int ok = pb.len == E;
        if (ok) memcpy(o->pinned, pb.buf, E);
        PyBuffer_Release(&pb);
        if (!ok) { PyErr_SetString(PyExc_ValueError, "live dispatch: load: one pin flag per expert"); goto bad; }
    }
    /* counters */
    long long cv[11];
    if (!PyArg_ParseTuple(ctr, "LLLLLLLLLLL", &cv[0], &cv[1], &cv[2], &cv[3], &cv[4], &cv[5], &cv[6],
                          &cv[7], &cv[8], &cv[9], &cv[10])) goto bad;
    o->step = cv[0]; o->last_layer = cv[1]; o->accesses = cv[2]; o->evictions = cv[3]; o->demand = cv[4];
    o->background = cv[5]; o->pf_loads = cv[6]; o->pf_useful = cv[7]; o->cpu_computes = cv[8];
    o->streamed = cv[9]; o->dispatches = cv[10];
    for (long i = 0; i < L; i++) {
        if (ll_item(lacc, i, &o->l_acc[i]) < 0 || ll_item(lhit, i, &o->l_hit[i]) < 0) goto bad;
    }
    /* caches: (rule, side a, side b, capacity, [(key, slot)], store state); every key of a
     * cache its own (its layer's with per-layer caches), every slot in the pool and used
     * once, the store's state as its class dumps it (st_load) */
    Params P = {1.0, 0.0, 0.0, 1, 1, L, E, K, o->per_layer ? E : K, NULL, 128.0};
#define LOAD_BAD(msg) do { PyErr_SetString(PyExc_ValueError, "live dispatch: load: " msg); goto bad; } while (0)
    for (long i = 0; i < o->ncaches; i++) {
        Cache *c = &o->C[i];
        int rule, side_a, side_b;
        long long cap;
        PyObject *res_o, *store;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(caches, i), "iiiLO!O", &rule, &side_a, &side_b, &cap,
                              &PyList_Type, &res_o, &store)) goto bad;
        int basic_a = side_a == R_LRU || side_a == R_LFU || side_a == R_SCORE || side_a == R_FT;
        int basic_b = side_b == R_LRU || side_b == R_LFU || side_b == R_SCORE || side_b == R_FT;
        if (rule < 0 || rule > R_LAST || (rule == R_SEG && (!basic_a || !basic_b))) LOAD_BAD("a store it does not hold");
        if (cap < 0) LOAD_BAD("a negative capacity");
        if (cache_init(c, rule, cap > LONG_MAX ? LONG_MAX : (long)cap, (int)(i * LISTS_PER_CACHE), &P, side_a, side_b) < 0) {
            PyErr_NoMemory();
            goto bad;
        }
        cache_layout(c, i, o->ncaches, o->per_layer, L, E);
        if ((rule == R_CRF || rule == R_CLASSLRU) && !S->kcrf) {
            S->kcrf = calloc(K, sizeof(double));
            S->klast = malloc(sizeof(long long) * K);
            if (!S->kcrf || !S->klast) { PyErr_NoMemory(); goto bad; }
            for (long k = 0; k < K; k++) S->klast[k] = -1;
        }
        long lo = o->per_layer ? i * E : 0, hi = o->per_layer ? (i + 1) * E : K;
        PyObject *res = as_tuple(res_o, -1, "residents");
        if (!res) goto bad;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(res); j++) {
            long k, sl;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(res, j), "ll", &k, &sl)) { Py_DECREF(res); goto bad; }
            if (k < lo || k >= hi || S->slot[k] >= 0 || sl < 0 || sl >= o->pool_size || used[sl]) {
                Py_DECREF(res);
                LOAD_BAD("a resident key or slot out of place");
            }
            used[sl] = 1;
            S->slot[k] = (int)sl;
            c->nres++;
        }
        Py_DECREF(res);
        SLoad x = {o, c, lo, hi};
        if (st_load(&x, store) < 0) goto bad;
    }
    /* the pool's free stack: the slots no resident holds */
    S->ftop = PyTuple_GET_SIZE(freel);
    if (S->ftop > o->pool_size) LOAD_BAD("a free list longer than the pool");
    for (long i = 0; i < S->ftop; i++) {
        long long v;
        if (ll_item(freel, i, &v) < 0) goto bad;
        if (v < 0 || v >= o->pool_size || used[v]) LOAD_BAD("a free slot out of place");
        used[v] = 1;
        S->fstack[i] = (int)v;
    }
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(pfl); j++) {
        long long k;
        if (ll_item(pfl, j, &k) < 0) goto bad;
        if (k < 0 || k >= K) LOAD_BAD("a prefetched key out of range");
        if (!o->pf[k]) { o->pf[k] = 1; o->npf++; }
    }
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(ttll); j++) {   /* (key, stamp), oldest first */
        long k;
        long long stamp;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(ttll, j), "lL", &k, &stamp)) goto bad;
        if (k < 0 || k >= K || S->slot[k] < 0 || o->pinned[k % E]) LOAD_BAD("a TTL key that is not an unpinned resident");
        t_touch(S, (int)k, stamp);
    }
    /* history: (window, [per layer [rows]], [per layer counts], [per layer len(bk) - 1]) */
    o->has_hist = hist != Py_None;
    if (o->has_hist) {
        PyObject *rows_o, *cnts_o, *bks_o;
        long W;
        if (!PyArg_ParseTuple(hist, "lO!O!O!", &W, &PyList_Type, &rows_o, &PyList_Type, &cnts_o, &PyList_Type, &bks_o)) goto bad;
        if (W < 1) LOAD_BAD("bad history window");
        PyObject *rows = as_tuple(rows_o, L, "the history's rows"), *cnts = rows ? as_tuple(cnts_o, L, "the history's counts") : NULL;
        PyObject *bks = cnts ? as_tuple(bks_o, L, "the history's buckets") : NULL;
        int ok = bks != NULL;
        long held = 0;
        for (long l = 0; ok && l < L; l++) {
            Py_ssize_t m = PySequence_Size(PyTuple_GET_ITEM(rows, l));
            if (m < 0) ok = 0;
            else if (m > held) held = m;
        }
        if (ok) {
            o->hcnt = calloc(L * E, sizeof(int));
            o->hbk = calloc(L, sizeof(long));
            o->hdelta = calloc(E, sizeof(int));
            o->htouched = malloc(sizeof(int) * (2 * E + 1));   /* an expert at most twice */
            if (!o->hdelta || !o->htouched || !o->hcnt || !o->hbk) { PyErr_NoMemory(); ok = 0; }
        }
        if (ok && ring_alloc(&o->hr, L, W, ring_start(W, held)) < 0) ok = 0;
        for (long l = 0; ok && l < L; l++) {
            if (ring_load_layer(&o->hr, L, l, PyTuple_GET_ITEM(rows, l), E, "history") < 0) { ok = 0; break; }
            PyObject *lc = as_tuple(PyTuple_GET_ITEM(cnts, l), E, "a layer's history counts");
            if (!lc) { ok = 0; break; }
            for (long e = 0; e < E && ok; e++) {
                long long v;
                if (ll_item(lc, e, &v) < 0) ok = 0;
                else if (v < 0 || v > INT_MAX) { PyErr_SetString(PyExc_ValueError, "live dispatch: load: a history count out of range"); ok = 0; }
                else o->hcnt[l * E + e] = (int)v;
            }
            Py_DECREF(lc);
            long long bk;
            if (ok && ll_item(bks, l, &bk) < 0) ok = 0;
            if (ok) o->hbk[l] = (long)bk;
        }
        Py_XDECREF(rows); Py_XDECREF(cnts); Py_XDECREF(bks);
        if (!ok) goto bad;
    }
    /* monitor: (window, ring, acc, hits, skipped, events, ev, ld, pfl, pfu, stall, seen,
     * log_interval, metrics, log) */
    o->has_mon = mon != Py_None;
    if (o->has_mon) {
        PyObject *ring, *events_o, *seen, *metrics, *mlog;
        long long sv[4];
        if (!PyArg_ParseTuple(mon, "lOLLLO!LLLLdO!lO!O!", &o->mwin, &ring, &o->macc, &o->mhits,
                              &o->mskipped, &PyList_Type, &events_o, &o->mev, &o->mld, &o->mpfl,
                              &o->mpfu, &o->mstall, &PyTuple_Type, &seen, &o->mlogint, &PyTuple_Type,
                              &metrics, &PyList_Type, &mlog)) goto bad;
        if (o->mwin < 1 || o->mlogint < 1 || o->macc < 0) LOAD_BAD("bad monitor");
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(metrics); i++)
            if (!PyUnicode_Check(PyTuple_GET_ITEM(metrics, i))) LOAD_BAD("a monitor metric that is not a name");
        Py_buffer rb;
        if (PyObject_GetBuffer(ring, &rb, PyBUF_SIMPLE) < 0) goto bad;
        o->ring = rb.len == o->mwin ? malloc(o->mwin) : NULL;
        if (!o->ring) { PyBuffer_Release(&rb); LOAD_BAD("bad ring"); }
        memcpy(o->ring, rb.buf, o->mwin);
        PyBuffer_Release(&rb);
        PyObject *events = as_tuple(events_o, -1, "the monitor's events");
        if (!events) goto bad;
        o->ecap = PyTuple_GET_SIZE(events) + 16;
        o->events = malloc(sizeof(MEvent) * o->ecap);
        if (!o->events) { Py_DECREF(events); PyErr_NoMemory(); goto bad; }
        o->ehead = 0; o->elen = PyTuple_GET_SIZE(events);
        for (long j = 0; j < o->elen; j++) {
            MEvent *x = &o->events[j];
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(events, j), "LLLLLd", &x->acc_index, &x->ev, &x->ld,
                                  &x->pfl, &x->pfu, &x->stall)) { Py_DECREF(events); goto bad; }
        }
        Py_DECREF(events);
        if (!PyArg_ParseTuple(seen, "LLLLd", &sv[0], &sv[1], &sv[2], &sv[3], &o->seen_stall)) goto bad;
        memcpy(o->seen, sv, sizeof sv);
        Py_INCREF(metrics); o->mmetrics = metrics;
        Py_INCREF(mlog); o->mlog = mlog;
    }
    o->rb_caps = malloc(sizeof(long) * o->ncaches);
    if (!o->rb_caps) { PyErr_NoMemory(); goto bad; }
    /* affinity: (depth, threshold, predicts, [(d, src, [(e, n, [(e2, c)])])],
     * [(layer, step, experts)]) */
    if (aff != Py_None) {
        PyObject *tabs_o, *lasts_o;
        int predicts;
        if (!PyArg_ParseTuple(aff, "ldpO!O!", &o->aff_depth, &o->aff_thr, &predicts, &PyList_Type, &tabs_o,
                              &PyList_Type, &lasts_o)) goto bad;
        long Da = o->aff_depth < L ? o->aff_depth : L;
        if (Da < 1) Da = 1;
        /* the table's size: fast.py refuses more than 2**23 counts; so does this */
        if ((double)Da * (double)L * (double)E * (double)E > (double)(1L << 23)) LOAD_BAD("an affinity table too large");
        o->has_aff = 1;
        o->aff_predict = predicts;
        o->aff_n = calloc(Da * L * E, sizeof(long long));
        o->aff_c = calloc(Da * L * E * E, sizeof(long long));
        o->aff_tab = calloc(Da * L, 1);
        o->aff_step = calloc(L, sizeof(long long));
        o->aff_has = calloc(L, 1);
        o->aff_last = malloc(sizeof(int) * L * E);
        o->aff_lastn = calloc(L, sizeof(int));
        o->aff_best = malloc(sizeof(double) * E);
        o->aff_bc = malloc(sizeof(long long) * E);
        o->aff_bn = malloc(sizeof(long long) * E);
        if (!o->aff_n || !o->aff_c || !o->aff_tab || !o->aff_step || !o->aff_has || !o->aff_last ||
            !o->aff_lastn || !o->aff_best || !o->aff_bc || !o->aff_bn) { PyErr_NoMemory(); goto bad; }
        PyObject *tabs = as_tuple(tabs_o, -1, "the affinity tables");
        if (!tabs) goto bad;
        int ok = 1;
        for (Py_ssize_t j = 0; ok && j < PyTuple_GET_SIZE(tabs); j++) {
            long d, src;
            PyObject *rows_o;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(tabs, j), "llO!", &d, &src, &PyList_Type, &rows_o)) { ok = 0; break; }
            if (d < 1 || d > Da || src < 0 || src >= L) {
                PyErr_SetString(PyExc_ValueError, "live dispatch: load: bad affinity table");
                ok = 0;
                break;
            }
            long t = (d - 1) * L + src;
            o->aff_tab[t] = 1;
            PyObject *rows = as_tuple(rows_o, -1, "an affinity table");
            if (!rows) { ok = 0; break; }
            for (Py_ssize_t q = 0; ok && q < PyTuple_GET_SIZE(rows); q++) {
                long e;
                long long rn;
                PyObject *nx_o;
                if (!PyArg_ParseTuple(PyTuple_GET_ITEM(rows, q), "lLO!", &e, &rn, &PyList_Type, &nx_o)) { ok = 0; break; }
                if (e < 0 || e >= E || rn < 0) { PyErr_SetString(PyExc_ValueError, "live dispatch: load: an affinity row out of range"); ok = 0; break; }
                o->aff_n[t * E + e] = rn;
                PyObject *nx = as_tuple(nx_o, -1, "an affinity row");
                if (!nx) { ok = 0; break; }
                for (Py_ssize_t z = 0; z < PyTuple_GET_SIZE(nx); z++) {
                    long e2;
                    long long cc;
                    if (!PyArg_ParseTuple(PyTuple_GET_ITEM(nx, z), "lL", &e2, &cc)) { ok = 0; break; }
                    /* (a transition is counted with its source: never more often) */
                    if (e2 < 0 || e2 >= E || cc < 0 || cc > rn) { PyErr_SetString(PyExc_ValueError, "live dispatch: load: an affinity count out of range"); ok = 0; break; }
                    o->aff_c[(t * E + e) * E + e2] = cc;
                }
                Py_DECREF(nx);
            }
            Py_DECREF(rows);
        }
        Py_DECREF(tabs);
        if (!ok) goto bad;
        PyObject *lasts = as_tuple(lasts_o, -1, "the affinity's last dispatches");
        if (!lasts) goto bad;
        for (Py_ssize_t j = 0; ok && j < PyTuple_GET_SIZE(lasts); j++) {
            long l;
            long long stp;
            PyObject *exs_o;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(lasts, j), "lLO", &l, &stp, &exs_o)) { ok = 0; break; }
            PyObject *exs = as_tuple(exs_o, -1, "a last dispatch");
            if (!exs) { ok = 0; break; }
            Py_ssize_t m = PyTuple_GET_SIZE(exs);
            if (m > E || l < 0 || l >= L) {
                Py_DECREF(exs);
                PyErr_SetString(PyExc_ValueError, "live dispatch: load: a last dispatch out of range");
                ok = 0;
                break;
            }
            o->aff_has[l] = 1;
            o->aff_step[l] = stp;
            o->aff_lastn[l] = (int)m;
            for (Py_ssize_t q = 0; q < m; q++) {
                long long e;
                if (ll_item(exs, q, &e) < 0) { ok = 0; break; }
                if (e < 0 || e >= E) { PyErr_SetString(PyExc_ValueError, "live dispatch: load: a last dispatch out of range"); ok = 0; break; }
                o->aff_last[l * E + q] = (int)e;
            }
            Py_DECREF(exs);
        }
        Py_DECREF(lasts);
        if (!ok) goto bad;
    }
    if (sig != Py_None && s_load(o, sig) < 0) goto bad;
    o->nrules = (int)PyTuple_GET_SIZE(rules);
    o->rules = calloc(o->nrules ? o->nrules : 1, sizeof(LRule));
    if (!o->rules) { PyErr_NoMemory(); goto bad; }
    for (int i = 0; i < o->nrules; i++) {
        LRule *r = &o->rules[i];
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(rules, i), "iiipdLpLL", &r->metric, &r->cmp, &r->unit,
                              &r->rearm, &r->value, &r->n, &r->armed, &r->held, &r->mark)) goto bad;
        if (r->metric < 0 || r->metric > M_STALL || r->cmp < 0 || r->cmp > C_NE || r->unit < 0 || r->unit > U_TOKENS)
            LOAD_BAD("an adapt rule it cannot evaluate");
    }
    if (o->nrules && !o->has_mon) LOAD_BAD("rules without a monitor");
#undef LOAD_BAD
    Py_DECREF(caches); Py_DECREF(freel); Py_DECREF(lacc); Py_DECREF(lhit); Py_DECREF(pfl); Py_DECREF(ttll);
    Py_DECREF(rules);
    free(used);
    o->owns = 1;
    o->dict_size = -1;          /* set by mark_owned(), once the glue removed the attributes */
    Py_RETURN_NONE;
bad:
    Py_XDECREF(caches); Py_XDECREF(freel); Py_XDECREF(lacc); Py_XDECREF(lhit); Py_XDECREF(pfl); Py_XDECREF(ttll);
    Py_XDECREF(rules);
    free(used);
    ls_free_state(o);
    return NULL;
}

static PyObject *ls_mark_owned(LiveState *o, PyObject *noarg) {
    o->dict_size = PyDict_GET_SIZE(o->dict);
    Py_RETURN_NONE;
}

static PyObject *ll_list(const long long *v, long n) {
    PyObject *l = PyList_New(n);
    if (!l) return NULL;
    for (long i = 0; i < n; i++) {
        PyObject *x = PyLong_FromLongLong(v[i]);
        if (!x) { Py_DECREF(l); return NULL; }
        PyList_SET_ITEM(l, i, x);
    }
    return l;
}

/* a list of n ints from v (NULL on error) */
static PyObject *int_list(const int *v, long n) {
    PyObject *l = PyList_New(n);
    if (!l) return NULL;
    for (long i = 0; i < n; i++) {
        PyObject *x = PyLong_FromLong(v[i]);
        if (!x) { Py_DECREF(l); return NULL; }
        PyList_SET_ITEM(l, i, x);
    }
    return l;
}

/* dump(keep=False): the state as plain Python values (the glue rebuilds the pure structures
 * from them). The C state is given up (owns = False) unless keep is true: a snapshot read
 * from inside a dispatch (fast._snapshot), which changes nothing. */
static PyObject *ls_dump(LiveState *o, PyObject *const *args, Py_ssize_t nargs) {
    int keep = 0;
    if (nargs > 1) { PyErr_SetString(PyExc_TypeError, "dump(keep=False)"); return NULL; }
    if (nargs == 1 && (keep = PyObject_IsTrue(args[0])) < 0) return NULL;
    if (!o->owns) { PyErr_SetString(PyExc_RuntimeError, "live dispatch: dump without the state"); return NULL; }
    if (!keep && o->in_call && !o->glue) {
        PyErr_SetString(PyExc_RuntimeError, "live dispatch: dump() from inside a dispatch (the state is in use)");
        return NULL;
    }
    State *S = &o->S;
    long L = o->L, E = o->E, K = o->K;
    PyObject *out = PyDict_New(), *x = NULL;
    if (!out) return NULL;
#define PUT(name, expr) do { x = (expr); if (!x || PyDict_SetItemString(out, name, x) < 0) goto bad; Py_CLEAR(x); } while (0)
    PUT("counters", Py_BuildValue("(LLLLLLLLLLL)", o->step, o->last_layer, o->accesses, o->evictions,
                                  o->demand, o->background, o->pf_loads, o->pf_useful, o->cpu_computes,
                                  o->streamed, o->dispatches));
    PUT("l_acc", ll_list(o->l_acc, L));
    PUT("l_hit", ll_list(o->l_hit, L));
    PUT("free", int_list(S->fstack, S->ftop));
    {
        x = PyList_New(o->ncaches);
        if (!x) goto bad;
        for (long i = 0; i < o->ncaches; i++) {
            Cache *c = &o->C[i];
            long lo = o->per_layer ? i * E : 0, hi = o->per_layer ? (i + 1) * E : K;
            PyObject *res = PyList_New(0), *st = NULL;
            if (!res) goto bad;
            for (long k = lo; k < hi; k++) {
                if (S->slot[k] < 0) continue;
                if (lappend(res, Py_BuildValue("(li)", k, S->slot[k])) < 0) { Py_DECREF(res); goto bad; }
            }
            st = st_dump(S, c);
            if (!st) { Py_DECREF(res); goto bad; }
            PyObject *ct = Py_BuildValue("(lNN)", c->cap, res, st);
            if (!ct) goto bad;
            PyList_SET_ITEM(x, i, ct);
        }
        if (PyDict_SetItemString(out, "caches", x) < 0) goto bad;
        Py_CLEAR(x);
    }
    {
        x = PyList_New(0);
        if (!x) goto bad;
        for (long k = 0; k < K && o->npf; k++)
            if (o->pf[k] && lappend(x, PyLong_FromLong(k)) < 0) goto bad;
        if (PyDict_SetItemString(out, "pf", x) < 0) goto bad;
        Py_CLEAR(x);
    }
    {
        x = PyList_New(0);
        if (!x) goto bad;
        for (int k = S->thead; k >= 0; k = S->tnxt[k])
            if (lappend(x, Py_BuildValue("(iL)", k, S->tstamp[k])) < 0) goto bad;
        if (PyDict_SetItemString(out, "ttl", x) < 0) goto bad;
        Py_CLEAR(x);
    }
    if (o->has_hist) {
        PyObject *rows = PyList_New(L), *cnts = PyList_New(L), *bks = PyList_New(L);
        int ok = rows && cnts && bks;
        for (long l = 0; ok && l < L; l++) {
            PyObject *lr = ring_dump_layer(&o->hr, l), *lc = lr ? int_list(o->hcnt + l * E, E) : NULL;
            PyObject *bk = lc ? PyLong_FromLong(o->hbk[l]) : NULL;
            if (!bk) { Py_XDECREF(lr); Py_XDECREF(lc); ok = 0; break; }
            PyList_SET_ITEM(rows, l, lr);
            PyList_SET_ITEM(cnts, l, lc);
            PyList_SET_ITEM(bks, l, bk);
        }
        if (!ok) { Py_XDECREF(rows); Py_XDECREF(cnts); Py_XDECREF(bks); goto bad; }
        PUT("hist", Py_BuildValue("(NNN)", rows, cnts, bks));
    }
    if (o->has_mon) {
        PyObject *ev = PyList_New(o->elen);
        if (!ev) goto bad;
        for (long j = 0; j < o->elen; j++) {
            MEvent *m = &o->events[(o->ehead + j) % o->ecap];
            PyObject *e = Py_BuildValue("(LLLLLd)", m->acc_index, m->ev, m->ld, m->pfl, m->pfu, m->stall);
            if (!e) { Py_DECREF(ev); goto bad; }
            PyList_SET_ITEM(ev, j, e);
        }
        PUT("mon", Py_BuildValue("(y#LLLNLLLLd[LLLLd])", (const char *)o->ring, (Py_ssize_t)o->mwin, o->macc,
                                 o->mhits, o->mskipped, ev, o->mev, o->mld, o->mpfl, o->mpfu, o->mstall,
                                 o->seen[0], o->seen[1], o->seen[2], o->seen[3], o->seen_stall));
    }
    if (o->has_aff) {
        long D = o->aff_depth < L ? o->aff_depth : L;
        if (D < 1) D = 1;
        PyObject *tabs = PyList_New(0), *lasts = PyList_New(0);
        if (!tabs || !lasts) { Py_XDECREF(tabs); Py_XDECREF(lasts); goto bad; }
        int err = 0;
        for (long t = 0; t < D * L && !err; t++) {
            if (!o->aff_tab[t]) continue;
            PyObject *rows = PyList_New(0);
            if (!rows) { err = 1; break; }
            for (long e = 0; e < E && !err; e++) {
                long long rn = o->aff_n[t * E + e];
                if (!rn) continue;
                /* the row's target counts as the dict Affinity.row keeps (built here, not
                 * as a list the glue would copy: a wide table is hundreds of MB of them) */
                PyObject *nx = PyDict_New();
                if (!nx) { err = 1; break; }
                const long long *c = o->aff_c + (t * E + e) * E;
                for (long e2 = 0; e2 < E && !err; e2++) {
                    if (!c[e2]) continue;
                    PyObject *kk = PyLong_FromLong(e2), *vv = PyLong_FromLongLong(c[e2]);
                    if (!kk || !vv || PyDict_SetItem(nx, kk, vv) < 0) err = 1;
                    Py_XDECREF(kk); Py_XDECREF(vv);
                }
                if (err) { Py_DECREF(nx); break; }
                if (lappend(rows, Py_BuildValue("(lLN)", e, rn, nx)) < 0) err = 1;
            }
            if (err) { Py_DECREF(rows); break; }
            if (lappend(tabs, Py_BuildValue("(llN)", t / L + 1, t % L, rows)) < 0) err = 1;
        }
        for (long l = 0; l < L && !err; l++) {
            if (!o->aff_has[l]) continue;
            PyObject *exs = PyTuple_New(o->aff_lastn[l]);
            if (!exs) { err = 1; break; }
            for (int q = 0; q < o->aff_lastn[l]; q++) {
                PyObject *v = PyLong_FromLong(o->aff_last[l * E + q]);
                if (!v) { err = 1; break; }
                PyTuple_SET_ITEM(exs, q, v);
            }
            if (err) { Py_DECREF(exs); break; }
            if (lappend(lasts, Py_BuildValue("(lLN)", l, o->aff_step[l], exs)) < 0) err = 1;
        }
        if (err) { Py_DECREF(tabs); Py_DECREF(lasts); goto bad; }
        PUT("aff", Py_BuildValue("(NN)", tabs, lasts));
    }
    if (o->has_sig) PUT("sig", s_dump(o));
    {
        x = PyList_New(o->nrules);
        if (!x) goto bad;
        for (int i = 0; i < o->nrules; i++) {
            LRule *r = &o->rules[i];
            PyObject *t = Py_BuildValue("(NLL)", PyBool_FromLong(r->armed), r->held, r->mark);
            if (!t) goto bad;
            PyList_SET_ITEM(x, i, t);
        }
        if (PyDict_SetItemString(out, "rules", x) < 0) goto bad;
        Py_CLEAR(x);
    }
#undef PUT
    if (!keep) ls_free_state(o);
    return out;
bad:
    Py_XDECREF(x);
    Py_DECREF(out);
    return NULL;
}

/* ------------------------------------------------------------ replay: the record loop in C
 * LiveState.replay(records, tl, tick, every): fast._live_replay's loop (each record through
 * this dispatch, then Timeline.dispatch, the stall added to the runtime, the ticks) with the
 * timeline's state held here: the same floating-point operations in the same order as
 * Timeline.dispatch and Timeline.demand (compiled with -ffp-contract=off), the arrival dict
 * worked on in place (the same dict operations, the same pruning). A plan or record of an
 * unusual shape goes to tl.dispatch in Python (the clocks moved out and back exactly).
 * Returns the count, or None (nothing done) when the timeline's state is not what it holds. */
typedef struct {
    PyObject *tl, *costs, *arrival;      /* arrival: a new reference */
    double now, link, stall_ms, transfer_ms, gpu_ms, cpu_ms, cpu_wait_ms;
    double txf, gpu1, cpu1, dense1;
    int overlap;
    long long transfers;                 /* transfers added since the last move out */
    int eb_int;                          /* expert_bytes an int (else a float) */
    long long eb_i, dbytes_i;            /* bytes added since the last move out (int) */
    double eb_f, bytes_f;                /* the bytes (float: they add up in order) */
    int bytes_float;                     /* tl.bytes now a float (bytes_f holds it) */
} TL;

static PyObject *s_tl_names[12], *s_dense_ms, *s_gpu_ms, *s_cpu_ms, *s_dispatch_name;
enum { T_NOW, T_LINK, T_STALL, T_XMS, T_GPU, T_CPU, T_CWAIT, T_TRANSFERS, T_BYTES, T_ARRIVAL,
       T_OVERLAP, T_C };

static int tl_float(PyObject *tl, PyObject *name, double *out) {   /* 1 ok, 0 not a float, -1 */
    PyObject *v = PyObject_GetAttr(tl, name);
    if (!v) return -1;
    int ok = PyFloat_CheckExact(v);
    if (ok) *out = PyFloat_AS_DOUBLE(v);
    Py_DECREF(v);
    return ok;
}

/* the timeline's state into T; 1 taken, 0 not (an unusual state), -1 error */
static int tl_load(TL *T, PyObject *tl) {
    static const char *priv[4] = {"_t_xfer", "_gpu1", "_cpu1", "_dense1"};
    double *dst[7] = {&T->now, &T->link, &T->stall_ms, &T->transfer_ms, &T->gpu_ms, &T->cpu_ms,
                      &T->cpu_wait_ms};
    double *pdst[4] = {&T->txf, &T->gpu1, &T->cpu1, &T->dense1};
    for (int i = 0; i < 7; i++) {
        int r = tl_float(tl, s_tl_names[i], dst[i]);
        if (r <= 0) return r;
    }
    for (int i = 0; i < 4; i++) {
        PyObject *v = PyObject_GetAttrString(tl, priv[i]);
        if (!v) return -1;
        int ok = PyFloat_CheckExact(v);
        if (ok) *pdst[i] = PyFloat_AS_DOUBLE(v);
        Py_DECREF(v);
        if (!ok) return 0;
    }
    PyObject *v = PyObject_GetAttr(tl, s_tl_names[T_TRANSFERS]);
    if (!v) return -1;
    int ok = PyLong_CheckExact(v);
    Py_DECREF(v);
    if (!ok) return 0;
    v = PyObject_GetAttr(tl, s_tl_names[T_BYTES]);
    if (!v) return -1;
    T->bytes_float = PyFloat_CheckExact(v);
    if (T->bytes_float) T->bytes_f = PyFloat_AS_DOUBLE(v);
    ok = T->bytes_float || PyLong_CheckExact(v);
    Py_DECREF(v);
    if (!ok) return 0;
    v = PyObject_GetAttr(tl, s_tl_names[T_OVERLAP]);
    if (!v) return -1;
    T->overlap = PyObject_IsTrue(v);
    Py_DECREF(v);
    if (T->overlap < 0) return -1;
    PyObject *c = PyObject_GetAttr(tl, s_tl_names[T_C]);
    if (!c) return -1;
    v = PyObject_GetAttrString(c, "expert_bytes");
    if (!v) { Py_DECREF(c); return -1; }
    if (PyLong_CheckExact(v)) {
        int of = 0;
        T->eb_i = PyLong_AsLongLongAndOverflow(v, &of);
        ok = !of && T->eb_i >= 0 && T->eb_i < (1LL << 40) && !PyErr_Occurred();
        T->eb_int = 1;
    } else if (PyFloat_CheckExact(v)) {
        T->eb_f = PyFloat_AS_DOUBLE(v);
        T->eb_int = 0;
        ok = 1;
    } else ok = 0;
    Py_DECREF(v);
    if (!ok || (T->eb_int && T->bytes_float)) { Py_DECREF(c); return PyErr_Occurred() ? -1 : 0; }
    PyObject *a = PyObject_GetAttr(tl, s_tl_names[T_ARRIVAL]);
    if (!a) { Py_DECREF(c); return -1; }
    ok = PyDict_CheckExact(a);
    if (ok) {
        Py_ssize_t pos = 0;
        PyObject *k, *x;
        while (PyDict_Next(a, &pos, &k, &x)) if (!PyFloat_CheckExact(x)) { ok = 0; break; }
    }
    if (!ok) { Py_DECREF(a); Py_DECREF(c); return 0; }
    T->tl = tl;
    Py_XSETREF(T->costs, c);
    Py_XSETREF(T->arrival, a);
    T->transfers = 0;
    T->dbytes_i = 0;
    return 1;
}

/* tl.<name> += d (Python ints: exact in any order) */
static int tl_add_int(PyObject *tl, PyObject *name, long long d) {
    PyObject *old = PyObject_GetAttr(tl, name);
    if (!old) return -1;
    PyObject *dv = PyLong_FromLongLong(d);
    PyObject *nv = dv ? PyNumber_Add(old, dv) : NULL;
    Py_DECREF(old); Py_XDECREF(dv);
    int r = nv ? PyObject_SetAttr(tl, name, nv) : -1;
    Py_XDECREF(nv);
    return r;
}

/* T's state back into the timeline (T stays valid: a later tl_load takes it again) */
static int tl_store(TL *T) {
    PyObject *tl = T->tl;
    double src[7] = {T->now, T->link, T->stall_ms, T->transfer_ms, T->gpu_ms, T->cpu_ms, T->cpu_wait_ms};
    for (int i = 0; i < 7; i++) {
        PyObject *v = PyFloat_FromDouble(src[i]);
        if (!v || PyObject_SetAttr(tl, s_tl_names[i], v) < 0) { Py_XDECREF(v); return -1; }
        Py_DECREF(v);
    }
    if (PyObject_SetAttr(tl, s_tl_names[T_ARRIVAL], T->arrival) < 0) return -1;
    if (T->transfers) {
        if (tl_add_int(tl, s_tl_names[T_TRANSFERS], T->transfers) < 0) return -1;
        T->transfers = 0;
    }
    if (T->eb_int && T->dbytes_i) {
        if (tl_add_int(tl, s_tl_names[T_BYTES], T->dbytes_i) < 0) return -1;
        T->dbytes_i = 0;
    } else if (!T->eb_int && T->bytes_float) {
        PyObject *v = PyFloat_FromDouble(T->bytes_f);
        if (!v || PyObject_SetAttr(tl, s_tl_names[T_BYTES], v) < 0) { Py_XDECREF(v); return -1; }
        Py_DECREF(v);
    }
    return 0;
}

/* nx transfers counted (Timeline: transfers, bytes; transfer_ms by the caller) */
static int tl_count(TL *T, long long nx) {
    T->transfers += nx;
    if (T->eb_int) { T->dbytes_i += nx * T->eb_i; return 0; }
    if (!T->bytes_float) {      /* the int tl.bytes plus a float: Python's int + float */
        PyObject *old = PyObject_GetAttr(T->tl, s_tl_names[T_BYTES]);
        if (!old) return -1;
        double b = PyLong_AsDouble(old);
        Py_DECREF(old);
        if (b == -1.0 && PyErr_Occurred()) return -1;
        T->bytes_f = b;
        T->bytes_float = 1;
    }
    T->bytes_f += (double)nx * T->eb_f;
    return 0;
}

/* a cost method of Costs for tokens n (a float) */
static int tl_cost(TL *T, PyObject *meth, PyObject *n, double *out) {   /* 1, 0 unusual, -1 */
    PyObject *v = PyObject_CallMethodOneArg(T->costs, meth, n);
    if (!v) return -1;
    int ok = PyFloat_CheckExact(v);
    if (ok) *out = PyFloat_AS_DOUBLE(v);
    Py_DECREF(v);
    return ok;
}

static inline int is_one(PyObject *n) {     /* n == 1 */
    if (PyLong_CheckExact(n)) {
        int of = 0;
        long v = PyLong_AsLongAndOverflow(n, &of);
        return !of && v == 1;
    }
    return PyObject_RichCompareBool(n, s_one_o, Py_EQ);
}

/* Timeline.demand */
static int tl_demand(TL *T, long long n, long long m, double dense, double *stall) {
    double gpu1 = T->gpu1;
    double t0 = T->now + dense;
    double busy = (double)n * gpu1;
    double t = t0 + busy;
    if (m) {
        double txf = T->txf, link = T->link;
        double s0 = t0 > link ? t0 : link;
        link = s0 + (double)m * txf;
        double last;
        if (!T->overlap) last = link + busy;
        else if (txf >= gpu1) last = link + gpu1;
        else last = s0 + txf + (double)m * gpu1;
        if (last > t) t = last;
        T->link = link;
        if (tl_count(T, m) < 0) return -1;
        T->transfer_ms += (double)m * txf;
    }
    double st = t - t0 - busy;
    T->gpu_ms += busy + dense;
    T->stall_ms += st;
    T->now = t;
    *stall = st;
    return 0;
}

typedef struct { double ready, comp; } Late;

/* a key tuple of a Plan's loads or evictions as an int key (-1: not one LiveState names) */
static long plan_key(LiveState *o, PyObject *key) {
    if (!PyTuple_CheckExact(key) || PyTuple_GET_SIZE(key) != 2) return -1;
    long l, e;
    if (!exact_int(PyTuple_GET_ITEM(key, 0), 0, o->L, &l) || !exact_int(PyTuple_GET_ITEM(key, 1), 0, o->E, &e))
        return -1;
    return l * o->E + e;
}

/* A Plan read into the lean record's arrays (the view tl_run times): 1 read, 0 a plan of
 * an unusual shape (the Python Timeline.dispatch takes it), -1 error. *layer, *n: its
 * layer and accesses; the experts into o->ex. */
static int plan_view(LiveState *o, PyObject *plan, long *layer, Py_ssize_t *n) {
    if (Py_TYPE(plan) != o->plan) return 0;
    PyObject *f[7];
    for (int i = 1; i < 7; i++) {
        f[i] = *(PyObject **)((char *)plan + o->off[i]);
        if (!f[i]) return 0;
    }
    PyObject *experts = f[2], *wh = f[3], *hits = f[4], *loads = f[5], *evicted = f[6];
    if (!PyList_CheckExact(experts) || !PyList_CheckExact(wh) || !PyList_CheckExact(hits) ||
            !PyList_CheckExact(loads) || !PyList_CheckExact(evicted))
        return 0;
    if (!exact_int(f[1], 0, o->L, layer)) return 0;
    Py_ssize_t m = PyList_GET_SIZE(hits);
    if (PyList_GET_SIZE(experts) != m || PyList_GET_SIZE(wh) != m || m > o->E) return 0;
    for (Py_ssize_t i = 0; i < m; i++) {
        PyObject *h = PyList_GET_ITEM(hits, i);
        long e, w;
        if ((h != Py_True && h != Py_False) || !exact_int(PyList_GET_ITEM(experts, i), 0, o->E, &e) ||
                !exact_int(PyList_GET_ITEM(wh, i), -2, LONG_MAX, &w))
            return 0;
        o->ex[i] = e; o->lwh[i] = w; o->hv[i] = h == Py_True;
    }
    o->ln = o->xn = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(loads); i++) {
        PyObject *ld = PyList_GET_ITEM(loads, i);
        if (!PyTuple_CheckExact(ld) || PyTuple_GET_SIZE(ld) != 4) return 0;
        long k = plan_key(o, PyTuple_GET_ITEM(ld, 0));
        if (k < 0) return 0;
        int kind = 3;                   /* (a kind the timeline does not issue) */
        for (int q = 0; q < 3; q++) {
            int eq = PyObject_RichCompareBool(PyTuple_GET_ITEM(ld, 3), s_kind[q], Py_EQ);
            if (eq < 0) return -1;
            if (eq) { kind = q; break; }
        }
        if (lrec_grow(o->ln, &o->lcap, &o->lk, &o->lsl, &o->lvk, &o->lkind) < 0) return -1;
        o->lk[o->ln] = (int)k; o->lsl[o->ln] = -1; o->lvk[o->ln] = -1; o->lkind[o->ln] = (unsigned char)kind;
        o->ln++;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(evicted); i++) {
        PyObject *ev = PyList_GET_ITEM(evicted, i);
        if (!PyTuple_CheckExact(ev) || PyTuple_GET_SIZE(ev) != 2) return 0;
        long k = plan_key(o, PyTuple_GET_ITEM(ev, 0));
        if (k < 0) return 0;
        if (lrec_grow(o->xn, &o->xcap, &o->xk, &o->xsl, NULL, NULL) < 0) return -1;
        o->xk[o->xn] = (int)k; o->xsl[o->xn] = -1;
        o->xn++;
    }
    *n = m;
    return 1;
}

/* the loads of one kind, issued one after another from time `from` (Timeline.dispatch's
 * background and prefetch loops): each lands at *link, noted in the arrival map */
static int tl_issue(LiveState *o, int kind, double from, double txf, double *link, long long *nx,
                    PyObject *arrival) {
    for (Py_ssize_t i = 0; i < o->ln; i++) {
        if (o->lkind[i] != kind) continue;
        *link = (from > *link ? from : *link) + txf;
        (*nx)++;
        PyObject *key = ls_key(o, o->lk[i]);
        PyObject *v = key ? PyFloat_FromDouble(*link) : NULL;
        if (!v || PyDict_SetItem(arrival, key, v) < 0) { Py_XDECREF(v); return -1; }
        Py_DECREF(v);
    }
    return 0;
}

/* Timeline.dispatch(plan, tokens_of, tokens) of the dispatch in the lean record (its layer
 * and n accesses, the experts in o->ex); 1 done, 0 unusual (nothing changed: the caller
 * runs the Python one on the Plan), -1 error */
static int tl_run(LiveState *o, TL *T, long layer, Py_ssize_t n, PyObject *tokens_of, PyObject *tokens,
                  double *stall, Late **lbuf, Py_ssize_t *lcap) {
    if (tokens_of != Py_None && !PyDict_CheckExact(tokens_of)) return 0;
    long long nfalse = 0, ns = 0, has_cpu = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        nfalse += !o->hv[i];
        ns += o->lwh[i] == -2;
        has_cpu |= o->lwh[i] == -1;
    }
    Py_ssize_t nl = o->ln;
    /* dense */
    double dense;
    int one = is_one(tokens);
    if (one < 0) return -1;
    if (one) dense = T->dense1;
    else {
        int r = tl_cost(T, s_dense_ms, tokens, &dense);
        if (r <= 0) return r;
    }
    PyObject *arrival = T->arrival;
    if (!PyDict_GET_SIZE(arrival) && tokens_of == Py_None && !has_cpu && nl + ns == nfalse) {
        if (tl_demand(T, n, nl + ns, dense, stall) < 0) return -1;
        return 1;
    }
    double t0 = T->now + dense, txf = T->txf, link = T->link, gpu1 = T->gpu1, cpu1 = T->cpu1;
    long long nx = 0;
    double early = 0.0, cpu_busy = 0.0;
    int unsorted = 0;
    Py_ssize_t nlate = 0;
    int use_tok = 0;
    if (tokens_of != Py_None) use_tok = PyDict_GET_SIZE(tokens_of) != 0;
    if (*lcap < n) {
        Late *nb = realloc(*lbuf, sizeof(Late) * (n ? n : 1));
        if (!nb) { PyErr_NoMemory(); return -1; }
        *lbuf = nb; *lcap = n;
    }
    Late *late = *lbuf;
    long base = layer * o->E;
    for (Py_ssize_t i = 0; i < n; i++) {
        long wv = o->lwh[i];
        int hit = o->hv[i];
        PyObject *nt = s_one_o;
        int n_one = 1;
        if (use_tok) {
            PyObject *e = PyLong_FromLong(o->ex[i]);
            if (!e) return -1;
            nt = PyDict_GetItemWithError(tokens_of, e);
            Py_DECREF(e);
            if (!nt) { if (PyErr_Occurred()) return -1; nt = s_one_o; }
            else if ((n_one = is_one(nt)) < 0) return -1;
        }
        if (wv == -1) {
            double x = cpu1;
            if (!n_one) { int r = tl_cost(T, s_cpu_ms, nt, &x); if (r <= 0) return r; }
            cpu_busy += x;
            continue;
        }
        double comp = gpu1;
        if (!n_one) { int r = tl_cost(T, s_gpu_ms, nt, &comp); if (r <= 0) return r; }
        double ready;
        PyObject *v = NULL;
        if ((hit || wv != -2) && PyDict_GET_SIZE(arrival)) {
            PyObject *key = ls_key(o, (int)(base + o->ex[i]));
            if (!key) return -1;
            v = PyDict_GetItemWithError(arrival, key);
            if (!v && PyErr_Occurred()) return -1;
        }
        if (hit) ready = v ? PyFloat_AS_DOUBLE(v) : 0.0;
        else if (!v) {
            link = (t0 > link ? t0 : link) + txf;
            nx++;
            ready = link;
        } else ready = PyFloat_AS_DOUBLE(v);
        if (ready <= t0) early += comp;
        else {
            if (nlate && ready < late[nlate - 1].ready) unsorted = 1;
            late[nlate].ready = ready; late[nlate].comp = comp; nlate++;
        }
    }
#if PY_VERSION_HEX >= 0x030C0000
    if (nlate && !T->overlap) return 0;    /* sum() of floats is compensated from 3.12 on */
#endif
    /* background loads start with the dispatch */
    if (nl && tl_issue(o, PK_BACKGROUND, t0, txf, &link, &nx, arrival) < 0) return -1;
    double busy = early, t;
    if (!nlate) t = t0 + early;
    else if (T->overlap) {
        if (unsorted) {     /* list.sort of (ready, comp) tuples: a stable sort on < */
            for (Py_ssize_t i = 1; i < nlate; i++) {
                Late x = late[i];
                Py_ssize_t j = i;
                while (j > 0 && (x.ready < late[j - 1].ready ||
                                 (x.ready == late[j - 1].ready && x.comp < late[j - 1].comp))) {
                    late[j] = late[j - 1];
                    j--;
                }
                late[j] = x;
            }
        }
        t = t0 + early;
        for (Py_ssize_t i = 0; i < nlate; i++) {
            if (late[i].ready > t) t = late[i].ready;
            t += late[i].comp;
            busy += late[i].comp;
        }
    } else {
        double last = late[0].ready, sm = 0.0;
        for (Py_ssize_t i = 1; i < nlate; i++) if (late[i].ready > last) last = late[i].ready;
        for (Py_ssize_t i = 0; i < nlate; i++) sm += late[i].comp;
        busy += sm;
        t = last + busy;
    }
    double st = t - t0 - busy;
    double cpu_end = t0 + cpu_busy;
    double end = t >= cpu_end ? t : cpu_end;
    if (cpu_busy != 0.0) {
        T->cpu_wait_ms += end - t;
        T->cpu_ms += cpu_busy;
    }
    T->gpu_ms += busy + dense;
    T->stall_ms += st;
    /* prefetches are issued when the dispatch ends */
    if (nl && tl_issue(o, PK_PREFETCH, end, txf, &link, &nx, arrival) < 0) return -1;
    if (PyDict_GET_SIZE(arrival)) {
        for (Py_ssize_t i = 0; i < o->xn; i++) {
            PyObject *key = ls_key(o, o->xk[i]);
            if (!key) return -1;
            int has = PyDict_Contains(arrival, key);     /* pop(key, None), without a KeyError */
            if (has < 0 || (has && PyDict_DelItem(arrival, key) < 0)) return -1;
        }
        if (PyDict_GET_SIZE(arrival) > 4096) {     /* forget transfers that have long landed */
            PyObject *na = PyDict_New();
            if (!na) return -1;
            Py_ssize_t pos = 0;
            PyObject *k, *x;
            while (PyDict_Next(arrival, &pos, &k, &x))
                if (PyFloat_AS_DOUBLE(x) > end && PyDict_SetItem(na, k, x) < 0) { Py_DECREF(na); return -1; }
            Py_SETREF(T->arrival, na);
        }
    }
    T->link = link;
    if (nx) {
        if (tl_count(T, nx) < 0) return -1;
        T->transfer_ms += (double)nx * txf;
    }
    T->now = end;
    *stall = st;
    return 1;
}

/* Timeline.dispatch of a Plan (read into the view first) */
static int tl_dispatch(LiveState *o, TL *T, PyObject *plan, PyObject *tokens_of, PyObject *tokens,
                       double *stall, Late **lbuf, Py_ssize_t *lcap) {
    long layer;
    Py_ssize_t n;
    int r = plan_view(o, plan, &layer, &n);
    if (r <= 0) return r;
    return tl_run(o, T, layer, n, tokens_of, tokens, stall, lbuf, lcap);
}

static PyObject *s_kwn_replay;   /* ("step", "predictions") */

/* rt.stall += v, in the runtime's __dict__ itself (LiveState reads it there; while the
 * state is in C the runtime's own __setattr__ is the one that brings the state back) */
static int ls_add_stall(LiveState *o, PyObject *v) {
    PyObject *old = PyDict_GetItemWithError(o->dict, s_stall);
    if (!old) { if (!PyErr_Occurred()) PyErr_SetObject(PyExc_AttributeError, s_stall); return -1; }
    Py_INCREF(old);
    PyObject *nv = PyNumber_InPlaceAdd(old, v);
    Py_DECREF(old);
    if (!nv) return -1;
    int r = PyDict_SetItem(o->dict, s_stall, nv);
    Py_DECREF(nv);
    return r;
}

static PyObject *ls_replay_loop(LiveState *o, PyObject *records, PyObject *tl, PyObject *tick, PyObject *every);

/* replay(records, tl, tick, every): for fast._live_replay, inside a replay that holds the
 * runtime's guard; the whole loop is one call (in_call): a tick or a Timeline that calls
 * back into the runtime reads snapshots, and cannot dispatch */
static PyObject *ls_replay(LiveState *o, PyObject *args) {
    PyObject *records, *tl, *tick, *every;
    if (!PyArg_ParseTuple(args, "O!OOO", &PyList_Type, &records, &tl, &tick, &every)) return NULL;
    if (!guard_mine(o->guard) || !o->guard->busy) {
        PyErr_SetString(PyExc_RuntimeError, "live dispatch: replay() outside a replay holding the runtime's guard");
        return NULL;
    }
    if (ls_enter(o, "a replay") < 0) return NULL;
    PyObject *r = ls_replay_loop(o, records, tl, tick, every);
    o->in_call = 0;
    return r;
}

static PyObject *ls_replay_loop(LiveState *o, PyObject *records, PyObject *tl, PyObject *tick, PyObject *every) {
    Py_ssize_t nrec = PyList_GET_SIZE(records);
    for (Py_ssize_t i = 0; i < nrec; i++) {
        PyObject *r = PyList_GET_ITEM(records, i);
        if (!PyTuple_CheckExact(r) || PyTuple_GET_SIZE(r) != 7) Py_RETURN_NONE;
    }
    int ev_on = PyObject_IsTrue(every);
    if (ev_on < 0) return NULL;
    TL T = {0};
    int r = tl_load(&T, tl);
    if (r <= 0) {
        Py_XDECREF(T.costs); Py_XDECREF(T.arrival);
        if (r < 0) return NULL;
        Py_RETURN_NONE;
    }
    Late *lbuf = NULL;
    Py_ssize_t lcap = 0;
    long long count = 0;
    PyObject *result = NULL;
    Py_INCREF(records);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(records); i++) {
        PyObject *rec = PyList_GET_ITEM(records, i);
        if (!PyTuple_CheckExact(rec) || PyTuple_GET_SIZE(rec) != 7) {
            PyErr_SetString(PyExc_ValueError, "live replay: the records changed during the replay");
            goto done;
        }
        Py_INCREF(rec);
        PyObject *a[6];
        for (int j = 0; j < 6; j++) a[j] = PyTuple_GET_ITEM(rec, j);
        PyObject *tokens = a[3], *tokens_of = PyTuple_GET_ITEM(rec, 6);
        PyObject *plan = ls_dispatch(o, a, 4, s_kwn_replay, 1);
        if (!plan) { Py_DECREF(rec); goto done; }
        double st;
        int d;
        if (plan == Py_None) {     /* the lean record: no Plan object */
            d = tl_run(o, &T, o->llayer, o->lnacc, tokens_of, tokens, &st, &lbuf, &lcap);
            if (d == 0) {          /* the Python timeline needs the Plan */
                Py_DECREF(plan);
                plan = ls_lean_plan(o, a[0], a[1]);
                if (!plan) { Py_DECREF(rec); goto done; }
            }
        } else d = tl_dispatch(o, &T, plan, tokens_of, tokens, &st, &lbuf, &lcap);
        if (d < 0) { Py_DECREF(plan); Py_DECREF(rec); goto done; }
        if (d == 0) {       /* Timeline.dispatch in Python */
            if (tl_store(&T) < 0) { Py_DECREF(plan); Py_DECREF(rec); goto done; }
            PyObject *sv = PyObject_CallMethodObjArgs(tl, s_dispatch_name, plan, tokens_of, tokens, NULL);
            Py_DECREF(plan);
            if (!sv) { Py_DECREF(rec); goto reload_fail; }
            int pos = 0;
            PyObject *z = PyFloat_FromDouble(0.0);
            pos = z ? PyObject_RichCompareBool(sv, z, Py_GT) : -1;
            Py_XDECREF(z);
            if (pos > 0 && ls_add_stall(o, sv) < 0) pos = -1;
            Py_DECREF(sv);
            if (pos < 0) { Py_DECREF(rec); goto reload_fail; }
            r = tl_load(&T, tl);
            if (r <= 0) {    /* the timeline changed under the loop: not resumable here */
                if (r == 0) PyErr_SetString(PyExc_RuntimeError, "live replay: the timeline's state changed type");
                Py_DECREF(rec);
                goto fail_noflush;
            }
        } else {
            Py_DECREF(plan);
            if (st > 0) {
                PyObject *sv = PyFloat_FromDouble(st);
                int bad = !sv || ls_add_stall(o, sv) < 0;
                Py_XDECREF(sv);
                if (bad) { Py_DECREF(rec); goto done; }
            }
        }
        Py_DECREF(rec);
        count++;
        if (ev_on) {
            PyObject *cnt = PyLong_FromLongLong(count);
            if (!cnt) goto done;
            PyObject *m = PyNumber_Remainder(cnt, every);
            int z = m ? PyObject_Not(m) : -1;
            Py_XDECREF(m);
            if (z < 0) { Py_DECREF(cnt); goto done; }
            if (z) {
                if (tl_store(&T) < 0) { Py_DECREF(cnt); goto done; }
                PyObject *x = PyObject_CallOneArg(tick, cnt);
                Py_DECREF(cnt);
                if (!x) goto reload_fail;
                Py_DECREF(x);
                r = tl_load(&T, tl);
                if (r <= 0) {
                    if (r == 0) PyErr_SetString(PyExc_RuntimeError, "live replay: the timeline's state changed type");
                    goto fail_noflush;
                }
            } else Py_DECREF(cnt);
        }
    }
    if (tl_store(&T) < 0) goto fail_noflush;
    result = PyLong_FromLongLong(count);
    goto fail_noflush;
done:       /* an error: the timeline as of the last record done */
    {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        if (tl_store(&T) < 0) { Py_XDECREF(et); Py_XDECREF(ev); Py_XDECREF(tb); goto fail_noflush; }
        PyErr_Restore(et, ev, tb);
    }
reload_fail:    /* (the timeline holds the state already) */
fail_noflush:
    Py_DECREF(records);
    free(lbuf);
    Py_XDECREF(T.costs); Py_XDECREF(T.arrival);
    return result;
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* fast._live_replayable over a list of record tuples: True / False, None where a record is
 * not one it judges (the Python function does) */
static PyObject *ls_replayable(LiveState *o, PyObject *records) {
    if (!PyList_CheckExact(records)) Py_RETURN_NONE;
    long buf[64];
    long *v = buf;
    Py_ssize_t cap = 64;
    PyObject *res = Py_True;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(records); i++) {
        PyObject *rec = PyList_GET_ITEM(records, i);
        if (!PyTuple_CheckExact(rec) || PyTuple_GET_SIZE(rec) < 6) { res = Py_None; break; }
        PyObject *experts = PyTuple_GET_ITEM(rec, 1), *preds = PyTuple_GET_ITEM(rec, 5);
        if (!PyList_CheckExact(experts)) { res = Py_False; break; }
        Py_ssize_t n = PyList_GET_SIZE(experts);
        if (n > 1) {
            if (n > cap) {
                long *nb = v == buf ? malloc(sizeof(long) * n) : realloc(v, sizeof(long) * n);
                if (!nb) { if (v != buf) free(v); return PyErr_NoMemory(); }
                v = nb; cap = n;
            }
            int odd = 0;
            for (Py_ssize_t j = 0; j < n && !odd; j++) {
                PyObject *e = PyList_GET_ITEM(experts, j);
                int of = 0;
                if (!PyLong_CheckExact(e)) odd = 1;
                else { v[j] = PyLong_AsLongAndOverflow(e, &of); odd = of; }
            }
            if (odd) { res = Py_None; break; }
            int dup = 0;
            if (n <= 16) {
                for (Py_ssize_t j = 1; j < n && !dup; j++)
                    for (Py_ssize_t k = 0; k < j; k++) if (v[k] == v[j]) { dup = 1; break; }
            } else {
                qsort(v, n, sizeof(long), cmp_long);
                for (Py_ssize_t j = 1; j < n; j++) if (v[j] == v[j - 1]) { dup = 1; break; }
            }
            if (dup) { res = Py_False; break; }
        }
        if (preds != Py_None && !PyDict_CheckExact(preds)) {
            int t = PyObject_IsTrue(preds);
            if (t < 0) { if (v != buf) free(v); return NULL; }
            if (t) { res = Py_False; break; }
        }
    }
    if (v != buf) free(v);
    Py_INCREF(res);
    return res;
}

static PyObject *ls_owns(LiveState *o, void *closure) { return PyBool_FromLong(o->owns); }

static PyObject *ls_tp_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    return PyVectorcall_Call(self, args, kwargs);
}

static PyObject *ls_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *rt, *pure, *plan, *take, *sync, *observe, *guard;
    long nl, ne;
    if (!PyArg_ParseTuple(args, "OOO!llOOOO!", &rt, &pure, &PyType_Type, &plan, &nl, &ne, &take, &sync, &observe,
                          &GuardType, &guard))
        return NULL;
    if (nl < 1 || ne < 1 || nl * ne > (1L << 26)) { PyErr_SetString(PyExc_ValueError, "LiveState: bad shape"); return NULL; }
    PyObject *d = PyObject_GenericGetDict(rt, NULL);
    if (!d) return NULL;
    LiveState *o = (LiveState *)type->tp_alloc(type, 0);
    if (!o) { Py_DECREF(d); return NULL; }
    o->vectorcall = (vectorcallfunc)ls_call;
    Py_INCREF(rt); o->rt = rt; o->dict = d;
    Py_INCREF(pure); o->pure = pure; Py_INCREF(take); o->take = take;
    Py_INCREF(sync); o->sync = sync; Py_INCREF(observe); o->observe = observe;
    Py_INCREF(plan); o->plan = (PyTypeObject *)plan;
    Py_INCREF(guard); o->guard = (Guard *)guard;
    o->L = nl; o->E = ne; o->K = nl * ne;
    o->keys = calloc(o->K, sizeof(PyObject *));
    o->ex = malloc(sizeof(long) * ne);
    o->wv = malloc(sizeof(double) * ne);
    o->hv = malloc(ne);
    o->ord = malloc(sizeof(int) * ne);
    o->lwh = malloc(sizeof(long) * ne);
    o->pr_at = calloc(nl, sizeof(long long));
    o->pr_off = calloc(nl, sizeof(long));
    o->pr_len = calloc(nl, sizeof(long));
    if (!o->keys || !o->ex || !o->wv || !o->hv || !o->ord || !o->lwh || !o->pr_at || !o->pr_off || !o->pr_len) {
        Py_DECREF(o);
        return PyErr_NoMemory();
    }
    for (int i = 0; i < 8; i++) {
        PyObject *desc = PyObject_GetAttrString(plan, plan_slots[i]);
        if (!desc) { Py_DECREF(o); return NULL; }
        if (Py_TYPE(desc) != &PyMemberDescr_Type ||
                ((PyMemberDescrObject *)desc)->d_member->type != T_OBJECT_EX) {
            Py_DECREF(desc); Py_DECREF(o);
            PyErr_SetString(PyExc_TypeError, "live dispatch: Plan's slots are not what it expects");
            return NULL;
        }
        o->off[i] = ((PyMemberDescrObject *)desc)->d_member->offset;
        Py_DECREF(desc);
    }
    return (PyObject *)o;
}

static PyMethodDef ls_methods[] = {
    {"load", (PyCFunction)ls_load, METH_VARARGS, NULL},
    {"dump", (PyCFunction)(void (*)(void))ls_dump, METH_FASTCALL,
     "dump(keep=False): the state as Python values; the C state is given up unless keep"},
    {"mark_owned", (PyCFunction)ls_mark_owned, METH_NOARGS, "the runtime's __dict__ is as the glue left it"},
    {"replay", (PyCFunction)ls_replay, METH_VARARGS,
     "replay(records, timeline, tick, every): fast._live_replay's loop in C (the count; None: not taken)"},
    {"replayable", (PyCFunction)ls_replayable, METH_O,
     "fast._live_replayable(records) in C (None: a record it does not judge)"},
    {"held_call", (PyCFunction)(void (*)(void))ls_held_call, METH_FASTCALL | METH_KEYWORDS,
     "the dispatch, for a replay loop that holds the runtime's guard (fast._live_replay)"},
    {"hits", (PyCFunction)(void (*)(void))ls_hits_call, METH_FASTCALL | METH_KEYWORDS,
     "hits(layer, experts, weights=None, tokens=1, step=None): the dispatch; True when every "
     "access hit and nothing moved, else its Plan"},
    {NULL, NULL, 0, NULL},
};

static PyObject *ls_in_call(LiveState *o, void *closure) { return PyBool_FromLong(o->in_call); }

static PyGetSetDef ls_getset[] = {
    {"owns", (getter)ls_owns, NULL, "True while the state is held in C", NULL},
    {"in_call", (getter)ls_in_call, NULL, "True while a dispatch or replay runs in C", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject LiveStateType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mpl.runtime._fast.LiveState",
    .tp_basicsize = sizeof(LiveState),
    .tp_dealloc = (destructor)ls_dealloc,
    .tp_vectorcall_offset = offsetof(LiveState, vectorcall),
    .tp_call = ls_tp_call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)ls_traverse,
    .tp_clear = (inquiry)ls_clear,
    .tp_free = PyObject_GC_Del,
    .tp_methods = ls_methods,
    .tp_getset = ls_getset,
    .tp_doc = "LiveState(runtime, pure_dispatch, Plan, num_layers, num_experts, take, sync, observe, guard): "
              "the compiled dispatch() holding the runtime's state in C (see mpl/runtime/fast.py).",
    .tp_new = ls_new,
};

static int ls_init_module(PyObject *m) {
#define INTERN(v, s) if (!(v = PyUnicode_InternFromString(s))) return -1;
    INTERN(s_kw_weights, "weights") INTERN(s_kw_tokens, "tokens") INTERN(s_kw_predictions, "predictions")
    INTERN(s_step, "step")
    INTERN(s_kind[PK_DEMAND], "demand") INTERN(s_kind[PK_BACKGROUND], "background")
    INTERN(s_kind[PK_PREFETCH], "prefetch") INTERN(s_stall, "stall") INTERN(s_debug, "debug")
    INTERN(s_access, "access")
    INTERN(g_metric_names[0], "hit_rate") INTERN(g_metric_names[1], "miss_rate")
    INTERN(g_metric_names[2], "eviction_rate") INTERN(g_metric_names[3], "prefetch_accuracy")
    INTERN(g_metric_names[4], "transfer_rate") INTERN(g_metric_names[5], "stall_ms")
    {
        static const char *tln[12] = {"now", "link_free", "stall_ms", "transfer_ms", "gpu_ms", "cpu_ms",
                                      "cpu_wait_ms", "transfers", "bytes", "arrival", "overlap", "c"};
        for (int i = 0; i < 12; i++) INTERN(s_tl_names[i], tln[i])
    }
    INTERN(s_dense_ms, "dense_ms") INTERN(s_gpu_ms, "gpu_expert_ms") INTERN(s_cpu_ms, "cpu_expert_ms")
    INTERN(s_dispatch_name, "dispatch")
#undef INTERN
    if (!(s_kwn_replay = PyTuple_Pack(2, s_step, s_kw_predictions))) return -1;
    if (!(s_fmt = PyUnicode_FromString("monitor %s"))) return -1;
    {   /* the runtime's logger (core.log): the monitor's records are logged at debug level */
        PyObject *logging = PyImport_ImportModule("logging");
        if (!logging) return -1;
        g_log = PyObject_CallMethod(logging, "getLogger", "s", "mpl.runtime");
        Py_DECREF(logging);
        if (!g_log) return -1;
    }
    if (!(s_cpu_o = PyLong_FromLong(-1)) || !(s_stream_o = PyLong_FromLong(-2)) || !(s_one_o = PyLong_FromLong(1)))
        return -1;
    ls_methods[0].ml_doc = load_doc;
    if (PyType_Ready(&LiveStateType) < 0) return -1;
    Py_INCREF(&LiveStateType);
    if (PyModule_AddObject(m, "LiveState", (PyObject *)&LiveStateType) < 0) { Py_DECREF(&LiveStateType); return -1; }
    return 0;
}
