/*
 * _fast.Learned: the learned next-layer predictor (mpl.runtime.prefetch.Learned) in C.
 *
 * The same model, the same arithmetic in the same order, so that both give the same
 * predictions and the same state for the same calls (tests/test_prefetch_learned_compiled.py
 * compares their dump()s after random call sequences): per (distance, source layer, source
 * expert) a row of target counts kept in the dict's insertion order (a new target at the
 * end; cut back to its row_cap largest counts, ties to the lower id, in that order; halved,
 * in place, dropping what falls below 0.5); per layer the experts and normalised router
 * weights of its current dispatch and the experts of its previous one; a moving frequency
 * per layer and expert (dense here, a dict there: an absent entry reads 0.0); the
 * candidates of a prediction in the order the dict there makes them (the nearest context
 * layer's targets as first met, then the next one's, then the layer's recent experts, then
 * the caller's speculative ones), each with its feature vector and probability, kept until
 * the target layer's routing arrives; the logistic model's weights updated candidate by
 * candidate in that order. Sums run left to right, as the Python reference writes them.
 *
 * No Python code runs once a call has parsed its arguments (every argument is made a
 * sequence first, the predictions mapping's items included; ints and floats are then read
 * without __index__ or __float__), so nothing can change the state under a call; every size
 * is bounded when the object is made. The work of observe and predict is in
 * lrn_observe_core and lrn_predict_core, which run no Python code: the compiled live
 * dispatch (_live.c, LiveState) calls them directly on the runtime's predictor.
 */

/* the largest tables the compiled predictor keeps (layers x experts, and distances x layers
 * x experts row slots); a larger shape takes the Python predictor */
#define LRN_MAX_KEYS (1L << 22)
#define LRN_STEP_MAX (1LL << 62)     /* steps beyond this are a caller's error (step +- 1 never overflows) */

typedef struct { int e; double c; } LEnt;
typedef struct { double p; int e; } PE;   /* a candidate's probability */
typedef struct { long long n; int len, cap; LEnt *ent; } LRow;

typedef struct {
    PyObject_HEAD
    long L, E;
    int context, row_cap, maxd, nf;
    long window;
    double confidence, rate;
    LRow **rows;                  /* maxd * L * E: ((d - 1) * L + src) * E + x */
    double *theta;                /* nf */
    char *cur_has, *cur_hasw;
    long long *cur_step;
    int *cur_n, *cur_e;           /* L, L * E */
    double *cur_w;                /* L * E */
    int *prev_n, *prev_e;         /* prev_n -1: None */
    double *freq, *fscale;        /* L * E, L */
    char *pd_has;
    long long *pd_step;
    int *pd_n;
    int **pd_e;
    double **pd_f, **pd_p;        /* per target layer: its candidates, features, probabilities */
    char *gt_has;
    long long *gt_step;
    int *gt_n, *gt_e;             /* L, L * E */
    int *mark;                    /* E: 1 + candidate index while features() runs */
    char *got;                    /* E */
    int *sc_e;                    /* E: the candidates being made */
    double *sc_f, *sc_p;          /* E * nf, E */
    int *arg_e;                   /* E: an observe's experts */
    double *arg_w;                /* E */
    PE *sc_pe;                    /* E: a prediction's candidates, sorted */
} Learned;

static void lrn_free_all(Learned *o) {
    if (o->rows) {
        long n = (long)o->maxd * o->L * o->E;
        for (long i = 0; i < n; i++)
            if (o->rows[i]) { free(o->rows[i]->ent); free(o->rows[i]); }
    }
    if (o->pd_e) for (long l = 0; l < o->L; l++) { free(o->pd_e[l]); free(o->pd_f[l]); free(o->pd_p[l]); }
    free(o->rows); free(o->theta); free(o->cur_has); free(o->cur_hasw); free(o->cur_step);
    free(o->cur_n); free(o->cur_e); free(o->cur_w); free(o->prev_n); free(o->prev_e);
    free(o->freq); free(o->fscale); free(o->pd_has); free(o->pd_step); free(o->pd_n);
    free(o->pd_e); free(o->pd_f); free(o->pd_p); free(o->gt_has); free(o->gt_step);
    free(o->gt_n); free(o->gt_e); free(o->mark); free(o->got); free(o->sc_e); free(o->sc_f);
    free(o->sc_p); free(o->arg_e); free(o->arg_w); free(o->sc_pe);
    o->rows = NULL; o->pd_e = NULL;
}

static void lrn_dealloc(Learned *o) {
    lrn_free_all(o);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

static long clamp1(long long v) { return v < 1 ? 1 : (v > LONG_MAX ? LONG_MAX : (long)v); }

static PyObject *lrn_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"num_layers", "num_experts", "context", "window", "confidence",
                             "depth", "row_cap", NULL};
    long long L, E, context, window, depth, row_cap = 16;
    double confidence;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "LLLLdL|L:Learned", kwlist, &L, &E, &context,
                                     &window, &confidence, &depth, &row_cap)) return NULL;
    if (L < 1 || E < 1 || L > LRN_MAX_KEYS || E > LRN_MAX_KEYS || L * E > LRN_MAX_KEYS) {
        PyErr_Format(PyExc_ValueError, "Learned: %lld layers x %lld experts is outside 1 .. %ld keys",
                     L, E, LRN_MAX_KEYS);
        return NULL;
    }
    context = clamp1(context);
    row_cap = clamp1(row_cap);
    depth = clamp1(depth);
    if (context > 1024 || row_cap > (1 << 20)) {
        PyErr_SetString(PyExc_ValueError, "Learned: context (at most 1024) or row_cap (at most 2^20) too large");
        return NULL;
    }
    long long maxd = depth + context - 1;      /* depth, context <= LONG_MAX, 1024: no overflow */
    if (maxd > L) maxd = L;
    if (maxd * L * E > LRN_MAX_KEYS) {         /* maxd <= L <= 2^22 and L * E <= 2^22 */
        PyErr_Format(PyExc_ValueError, "Learned: %lld distances x %lld layers x %lld experts is more "
                     "than %ld rows", maxd, L, E, LRN_MAX_KEYS);
        return NULL;
    }
    Learned *o = (Learned *)type->tp_alloc(type, 0);
    if (!o) return NULL;
    o->L = (long)L; o->E = (long)E; o->context = (int)context; o->row_cap = (int)row_cap;
    o->maxd = (int)maxd; o->nf = (int)context + 4; o->window = clamp1(window);
    o->confidence = confidence; o->rate = 0.05;
    size_t K = (size_t)(L * E), nf = (size_t)o->nf;
    o->rows = calloc((size_t)(maxd * L * E), sizeof(LRow *));
    o->theta = calloc(nf, sizeof(double));
    o->cur_has = calloc(L, 1); o->cur_hasw = calloc(L, 1); o->cur_step = calloc(L, sizeof(long long));
    o->cur_n = calloc(L, sizeof(int)); o->cur_e = calloc(K, sizeof(int)); o->cur_w = calloc(K, sizeof(double));
    o->prev_n = malloc(sizeof(int) * (size_t)L); o->prev_e = calloc(K, sizeof(int));
    o->freq = calloc(K, sizeof(double)); o->fscale = malloc(sizeof(double) * (size_t)L);
    o->pd_has = calloc(L, 1); o->pd_step = calloc(L, sizeof(long long)); o->pd_n = calloc(L, sizeof(int));
    o->pd_e = calloc(L, sizeof(int *)); o->pd_f = calloc(L, sizeof(double *)); o->pd_p = calloc(L, sizeof(double *));
    o->gt_has = calloc(L, 1); o->gt_step = calloc(L, sizeof(long long)); o->gt_n = calloc(L, sizeof(int));
    o->gt_e = calloc(K, sizeof(int));
    o->mark = calloc(E, sizeof(int)); o->got = calloc(E, 1); o->sc_e = malloc(sizeof(int) * (size_t)E);
    o->sc_f = malloc(sizeof(double) * (size_t)E * nf); o->sc_p = malloc(sizeof(double) * (size_t)E);
    o->arg_e = malloc(sizeof(int) * (size_t)E); o->arg_w = malloc(sizeof(double) * (size_t)E);
    o->sc_pe = malloc(sizeof(PE) * (size_t)E);
    if (!o->rows || !o->theta || !o->cur_has || !o->cur_hasw || !o->cur_step || !o->cur_n || !o->cur_e ||
        !o->cur_w || !o->prev_n || !o->prev_e || !o->freq || !o->fscale || !o->pd_has || !o->pd_step ||
        !o->pd_n || !o->pd_e || !o->pd_f || !o->pd_p || !o->gt_has || !o->gt_step || !o->gt_n || !o->gt_e ||
        !o->mark || !o->got || !o->sc_e || !o->sc_f || !o->sc_p || !o->arg_e || !o->arg_w || !o->sc_pe) {
        Py_DECREF(o);
        return PyErr_NoMemory();
    }
    for (long l = 0; l < L; l++) { o->prev_n[l] = -1; o->fscale[l] = 1.0; }
    o->theta[0] = 2.0;                 /* prior: the nearest layer's transitions, the last pass */
    o->theta[o->context] = 1.0;
    o->theta[o->nf - 1] = -2.0;
    return (PyObject *)o;
}

/* ------------------------------------------------------------------ arguments */
/* ids (seq: a PySequence_Fast result of distinct ints in [0, E)) into buf; their count, -1
 * with an exception. No Python code runs in it (ints are read as they are stored); at most E
 * ids are written (each a distinct one in range) */
static Py_ssize_t lrn_ids(Learned *o, PyObject *seq, int *buf, int distinct_only, const char *what) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), m = 0;
    PyObject **items = PySequence_Fast_ITEMS(seq);
    int bad = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = items[i];
        if (!PyLong_Check(x)) {
            PyErr_Format(PyExc_TypeError, "Learned: %s must be ints, not %.80s", what, Py_TYPE(x)->tp_name);
            bad = 1; break;
        }
        int of = 0;
        long e = PyLong_AsLongAndOverflow(x, &of);
        if (of || e < 0 || e >= o->E) {
            PyErr_Format(PyExc_ValueError, "Learned: %s must be in 0 .. %ld", what, o->E - 1);
            bad = 1; break;
        }
        if (o->got[e]) {              /* seen in this sequence */
            if (distinct_only) continue;
            PyErr_Format(PyExc_ValueError, "Learned: %s must be distinct", what);
            bad = 1; break;
        }
        o->got[e] = 1;
        buf[m++] = (int)e;
    }
    for (Py_ssize_t i = 0; i < m; i++) o->got[buf[i]] = 0;
    return bad ? -1 : m;
}

/* ------------------------------------------------------------------ rows */
static int row_find(const LRow *r, int e) {
    for (int i = 0; i < r->len; i++) if (r->ent[i].e == e) return i;
    return -1;
}

static int lent_cmp(const void *a, const void *b) {    /* counts descending, then ids */
    const LEnt *x = a, *y = b;
    if (x->c != y->c) return x->c > y->c ? -1 : 1;
    return (x->e > y->e) - (x->e < y->e);
}

/* Learned._count: sources' rows at distance d from src learn the targets; -1 MemoryError */
static int lrn_count(Learned *o, int d, long src, const int *sources, int ns, const int *targets, int nt) {
    LRow **tab = o->rows + ((size_t)(d - 1) * o->L + src) * o->E;
    int cap = o->row_cap;
    for (int i = 0; i < ns; i++) {
        LRow *r = tab[sources[i]];
        if (!r) {
            r = calloc(1, sizeof(LRow));
            if (!r) { PyErr_NoMemory(); return -1; }
            tab[sources[i]] = r;
        }
        r->n++;
        if (r->len + nt > r->cap) {
            long nc = (long)r->cap * 2;
            if (nc < r->len + nt) nc = r->len + nt;
            if (nc < 8) nc = 8;
            LEnt *ne = realloc(r->ent, sizeof(LEnt) * (size_t)nc);
            if (!ne) { PyErr_NoMemory(); return -1; }
            r->ent = ne;
            r->cap = (int)nc;
        }
        for (int j = 0; j < nt; j++) {
            int at = row_find(r, targets[j]);
            if (at >= 0) r->ent[at].c = r->ent[at].c + 1.0;
            else { r->ent[r->len].e = targets[j]; r->ent[r->len].c = 1.0; r->len++; }
        }
        if (r->len > 2 * (long)cap) {          /* keep the cap largest counts (ties: lower id) */
            qsort(r->ent, (size_t)r->len, sizeof(LEnt), lent_cmp);
            r->len = cap;
        }
        /* forget half: follow a change of topic (n >= 2 x window, without overflowing) */
        if (o->window <= LLONG_MAX / 2 && r->n >= 2 * (long long)o->window) {
            r->n /= 2;
            int k = 0;
            for (int j = 0; j < r->len; j++) {
                double v = r->ent[j].c / 2;
                if (v < 0.5) continue;
                r->ent[k].e = r->ent[j].e;
                r->ent[k].c = v;
                k++;
            }
            r->len = k;
        }
    }
    return 0;
}

static void lrn_frequency(Learned *o, long layer, const int *ex, int n) {
    double a = 1.0 / (double)o->window;
    double *f = o->freq + (size_t)layer * o->E;
    if (a >= 1.0) {                              /* a window of one pass: the pass itself */
        memset(f, 0, sizeof(double) * (size_t)o->E);
        for (int i = 0; i < n; i++) f[ex[i]] = 1.0;
        o->fscale[layer] = 1.0;
        return;
    }
    double s = o->fscale[layer] / (1.0 - a);
    for (int i = 0; i < n; i++) f[ex[i]] = f[ex[i]] + a * s;
    if (s > 1e12) {                              /* renormalise (and drop what has faded) */
        for (long e = 0; e < o->E; e++) {
            if (f[e] == 0.0) continue;           /* (absent) */
            double v = f[e] / s;
            f[e] = v < 1e-4 ? 0.0 : v;
        }
        s = 1.0;
    }
    o->fscale[layer] = s;
}

/* ------------------------------------------------------------------ observe */
/* a speculative prediction for layer t (of step st): its n distinct ids */
typedef struct { long t; long long st; Py_ssize_t n; const int *ids; } GateArg;

/* Learned.observe's state change: layer's dispatch of step (|step| <= 2^62, layer in range)
 * selected the n distinct experts in o->arg_e (n <= E), with router weights o->arg_w when
 * hasw (their sum, left to right: total > 0); the gates are the caller's speculative
 * predictions (distinct layers in range, each a list of distinct ids in range; ids may
 * repeat: the first of each is kept). Runs no Python code; 0, or -1 with MemoryError (the
 * state then is what the reference's would be at the same failure: rows counted so far). */
static int lrn_observe_core(Learned *o, long layer, long long step, Py_ssize_t n, int hasw, double total,
                            const GateArg *gates, Py_ssize_t ng) {
    /* learn from the prediction made for this layer */
    if (o->pd_has[layer]) {
        o->pd_has[layer] = 0;
        if (o->pd_step[layer] == step) {
            for (Py_ssize_t i = 0; i < n; i++) o->got[o->arg_e[i]] = 1;
            double *th = o->theta, rate = o->rate;
            int nf = o->nf;
            for (int c = 0; c < o->pd_n[layer]; c++) {
                double p = o->pd_p[layer][c], g;
                if (o->got[o->pd_e[layer][c]]) g = rate * (p - 1.0);
                else if (p < 0.02) continue;
                else g = rate * p;
                const double *f = o->pd_f[layer] + (size_t)c * nf;
                for (int j = 0; j < nf; j++) {
                    double v = f[j];
                    if (v != 0.0) th[j] -= g * v;
                }
            }
            for (Py_ssize_t i = 0; i < n; i++) o->got[o->arg_e[i]] = 0;
        }
    }
    for (int d = 1; d <= o->maxd; d++) {
        long src = layer - d;
        long long src_step = step;
        if (src < 0) { src += o->L; src_step = step - 1; }
        if (o->cur_has[src] && o->cur_step[src] == src_step &&
            lrn_count(o, d, src, o->cur_e + (size_t)src * o->E, o->cur_n[src], o->arg_e, (int)n) < 0)
            return -1;
    }
    lrn_frequency(o, layer, o->arg_e, (int)n);
    size_t base = (size_t)layer * o->E;
    if (o->cur_has[layer]) {
        memcpy(o->prev_e + base, o->cur_e + base, sizeof(int) * (size_t)o->cur_n[layer]);
        o->prev_n[layer] = o->cur_n[layer];
    } else o->prev_n[layer] = -1;
    o->cur_has[layer] = 1;
    o->cur_step[layer] = step;
    o->cur_n[layer] = (int)n;
    memcpy(o->cur_e + base, o->arg_e, sizeof(int) * (size_t)n);
    o->cur_hasw[layer] = (char)hasw;
    if (hasw) for (Py_ssize_t i = 0; i < n; i++) o->cur_w[base + i] = o->arg_w[i] / total;
    for (Py_ssize_t i = 0; i < ng; i++) {
        long t = gates[i].t;
        int *dst = o->gt_e + (size_t)t * o->E, m = 0;
        for (Py_ssize_t j = 0; j < gates[i].n; j++) {   /* dict.fromkeys: the first of each id */
            int e = gates[i].ids[j];
            if (o->got[e]) continue;
            o->got[e] = 1;
            dst[m++] = e;
        }
        for (int j = 0; j < m; j++) o->got[dst[j]] = 0;
        o->gt_has[t] = 1;
        o->gt_step[t] = gates[i].st;
        o->gt_n[t] = m;
    }
    return 0;
}

static PyObject *lrn_observe(Learned *o, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"layer", "step", "experts", "weights", "predictions", NULL};
    long layer;
    long long step;
    PyObject *ex_o, *w_o = Py_None, *pr_o = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "lLO|OO:observe", kwlist, &layer, &step, &ex_o, &w_o, &pr_o))
        return NULL;
    if (layer < 0 || layer >= o->L || step < -LRN_STEP_MAX || step > LRN_STEP_MAX) {
        PyErr_Format(PyExc_ValueError, "Learned.observe: layer must be in 0 .. %ld and |step| at most 2^62",
                     o->L - 1);
        return NULL;
    }
    /* every argument as a sequence first (what may run Python code: an iterable's __iter__,
     * a mapping's items(), __bool__), then read into the scratch buffers with no Python
     * code in between: nothing can call into this object between the reads and their use */
    PyObject *ex = NULL, *ws = NULL, *items = NULL, *vals = NULL, *result = NULL;
    GateArg *gates = NULL;
    int *gids = NULL;
    Py_ssize_t ng = 0;
    if (!(ex = PySequence_Fast(ex_o, "experts must be a sequence"))) return NULL;
    if (w_o != Py_None && !(ws = PySequence_Fast(w_o, "weights must be a sequence"))) goto done;
    if (pr_o != Py_None) {
        int truth = PyObject_IsTrue(pr_o);
        if (truth < 0) goto done;
        if (truth) {
            if (!(items = PyMapping_Items(pr_o))) goto done;
            if (!PyList_Check(items)) {
                PyErr_SetString(PyExc_TypeError, "Learned.observe: predictions.items() must give a list");
                goto done;
            }
            ng = PyList_GET_SIZE(items);
            if (ng > o->L) {                 /* distinct keys: one at least is not a layer */
                PyErr_Format(PyExc_ValueError, "Learned.observe: a predicted layer must be in 0 .. %ld", o->L - 1);
                goto done;
            }
            if (!(vals = PyTuple_New(ng))) goto done;
            for (Py_ssize_t i = 0; i < ng; i++) {
                PyObject *kv = PyList_GET_ITEM(items, i);
                if (!PyTuple_Check(kv) || PyTuple_GET_SIZE(kv) != 2 || !PyLong_Check(PyTuple_GET_ITEM(kv, 0))) {
                    PyErr_SetString(PyExc_TypeError, "Learned.observe: predictions map layers to expert ids");
                    goto done;
                }
                PyObject *v = PySequence_Fast(PyTuple_GET_ITEM(kv, 1), "predicted experts must be a sequence");
                if (!v) goto done;
                PyTuple_SET_ITEM(vals, i, v);
            }
        }
    }
    /* from here on no Python code runs */
    Py_ssize_t n = lrn_ids(o, ex, o->arg_e, 0, "experts");
    if (n < 0) goto done;
    int hasw = 0;
    double total = 0.0;
    if (ws) {
        if (PySequence_Fast_GET_SIZE(ws) != n) {
            PyErr_SetString(PyExc_ValueError, "Learned.observe: one weight per expert");
            goto done;
        }
        PyObject **it = PySequence_Fast_ITEMS(ws);
        for (Py_ssize_t i = 0; i < n; i++) {
            double v;
            if (PyFloat_Check(it[i])) v = PyFloat_AS_DOUBLE(it[i]);
            else if (PyLong_Check(it[i])) {
                v = PyLong_AsDouble(it[i]);
                if (v == -1.0 && PyErr_Occurred()) goto done;
            } else {
                PyErr_Format(PyExc_TypeError, "Learned.observe: weights must be numbers, not %.80s",
                             Py_TYPE(it[i])->tp_name);
                goto done;
            }
            o->arg_w[i] = v;
            total += v;                        /* left to right, as the reference */
        }
        hasw = total > 0;
    }
    if (ng) {      /* the speculative predictions, copied before anything changes */
        if ((size_t)ng > SIZE_MAX / sizeof(GateArg) || (size_t)ng > SIZE_MAX / sizeof(int) / (size_t)o->E) {
            PyErr_NoMemory();
            goto done;
        }
        gates = malloc(sizeof(GateArg) * (size_t)ng);
        gids = malloc(sizeof(int) * (size_t)ng * (size_t)o->E);
        if (!gates || !gids) { PyErr_NoMemory(); goto done; }
        for (Py_ssize_t i = 0; i < ng; i++) {
            PyObject *kv = PyList_GET_ITEM(items, i);
            int of = 0;
            long t = PyLong_AsLongAndOverflow(PyTuple_GET_ITEM(kv, 0), &of);
            if (of || t < 0 || t >= o->L) {
                PyErr_Format(PyExc_ValueError, "Learned.observe: a predicted layer must be in 0 .. %ld", o->L - 1);
                goto done;
            }
            Py_ssize_t m = lrn_ids(o, PyTuple_GET_ITEM(vals, i), gids + (size_t)i * o->E, 1, "predicted experts");
            if (m < 0) goto done;
            gates[i].t = t;
            gates[i].st = t > layer ? step : step + 1;
            gates[i].n = m;
            gates[i].ids = gids + (size_t)i * o->E;
        }
    }
    if (lrn_observe_core(o, layer, step, n, hasw, total, gates, ng) == 0) {
        Py_INCREF(Py_None);
        result = Py_None;
    }
done:
    free(gates); free(gids);
    Py_XDECREF(ex); Py_XDECREF(ws); Py_XDECREF(items); Py_XDECREF(vals);
    return result;
}

/* ------------------------------------------------------------------ predict */
static inline int lrn_cand(Learned *o, int e, int *cnt) {   /* e's candidate index (made if new) */
    int at = o->mark[e];
    if (at) return at - 1;
    int c = (*cnt)++;
    o->mark[e] = c + 1;
    o->sc_e[c] = e;
    memset(o->sc_f + (size_t)c * o->nf, 0, sizeof(double) * (size_t)o->nf);
    return c;
}

/* Learned.features(t, st) into the scratch candidates; their count */
static int lrn_features(Learned *o, long t, long long st) {
    int D = o->context, nf = o->nf, cnt = 0, rank = 0;
    long L = o->L, E = o->E;
    for (int d = 1; d <= o->maxd && rank < D; d++) {
        long src = t - d;
        long long sst = st;
        if (src < 0) { src += L; sst = st - 1; }
        if (!o->cur_has[src] || o->cur_step[src] != sst) continue;
        int r = rank++;
        LRow **tab = o->rows + ((size_t)(d - 1) * L + src) * E;
        int k = o->cur_n[src];
        const int *xs = o->cur_e + (size_t)src * E;
        const double *ws = o->cur_hasw[src] ? o->cur_w + (size_t)src * E : NULL;
        for (int i = 0; i < k; i++) {
            const LRow *row = tab[xs[i]];
            if (!row || !row->n) continue;
            double w = (ws ? ws[i] : 1.0 / (double)k) / (double)row->n;
            for (int j = 0; j < row->len; j++) {
                int c = lrn_cand(o, row->ent[j].e, &cnt);
                o->sc_f[(size_t)c * nf + r] += w * row->ent[j].c;
            }
        }
    }
    const int *recent = NULL;
    int nr = 0;
    if (o->cur_has[t] && o->cur_step[t] < st) { recent = o->cur_e + (size_t)t * E; nr = o->cur_n[t]; }
    else if (o->prev_n[t] >= 0) { recent = o->prev_e + (size_t)t * E; nr = o->prev_n[t]; }
    for (int i = 0; i < nr; i++) o->sc_f[(size_t)lrn_cand(o, recent[i], &cnt) * nf + D] = 1.0;
    if (o->gt_has[t] && o->gt_step[t] == st) {
        const int *g = o->gt_e + (size_t)t * E;
        for (int i = 0; i < o->gt_n[t]; i++) o->sc_f[(size_t)lrn_cand(o, g[i], &cnt) * nf + D + 2] = 1.0;
    }
    const double *fr = o->freq + (size_t)t * E;
    double s = o->fscale[t];
    for (int c = 0; c < cnt; c++) {
        double *f = o->sc_f + (size_t)c * nf;
        f[D + 1] = fr[o->sc_e[c]] / s;
        f[D + 3] = 1.0;
        o->mark[o->sc_e[c]] = 0;
    }
    return cnt;
}

static int pe_cmp(const void *a, const void *b) {     /* probability descending, then ids */
    const PE *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return (x->e > y->e) - (x->e < y->e);
}

/* Learned.predict's work for layer's dispatch of step (|step| <= 2^62, layer in range,
 * 0 <= d <= 2^62): the pending prediction for layer + d kept, the candidates with a
 * probability >= confidence in o->sc_pe, most probable first (ties: the lower id); their
 * number, or -1 with MemoryError. Runs no Python code. */
static int lrn_predict_core(Learned *o, long layer, long long step, long long d) {
    long long tt = layer + d;
    long long st = step + tt / o->L;
    long t = (long)(tt % o->L);
    int cnt = lrn_features(o, t, st), nf = o->nf;
    const double *th = o->theta;
    for (int c = 0; c < cnt; c++) {
        const double *f = o->sc_f + (size_t)c * nf;
        double z = 0.0;
        for (int j = 0; j < nf; j++) z += th[j] * f[j];
        o->sc_p[c] = z > -40 ? 1.0 / (1.0 + exp(-z)) : 0.0;
    }
    /* the pending prediction for t, kept at its size */
    if (cnt > 0) {
        int *ne = realloc(o->pd_e[t], sizeof(int) * (size_t)cnt);
        if (ne) o->pd_e[t] = ne;
        double *nfv = ne ? realloc(o->pd_f[t], sizeof(double) * (size_t)cnt * nf) : NULL;
        if (nfv) o->pd_f[t] = nfv;
        double *np = nfv ? realloc(o->pd_p[t], sizeof(double) * (size_t)cnt) : NULL;
        if (!np) { o->pd_has[t] = 0; PyErr_NoMemory(); return -1; }
        o->pd_p[t] = np;
        memcpy(o->pd_e[t], o->sc_e, sizeof(int) * (size_t)cnt);
        memcpy(o->pd_f[t], o->sc_f, sizeof(double) * (size_t)cnt * nf);
        memcpy(o->pd_p[t], o->sc_p, sizeof(double) * (size_t)cnt);
    }
    o->pd_has[t] = 1;
    o->pd_step[t] = st;
    o->pd_n[t] = cnt;
    PE *good = o->sc_pe;
    int ng = 0;
    for (int c = 0; c < cnt; c++)
        if (o->sc_p[c] >= o->confidence) { good[ng].p = o->sc_p[c]; good[ng].e = o->sc_e[c]; ng++; }
    qsort(good, (size_t)ng, sizeof(PE), pe_cmp);
    return ng;
}

static PyObject *lrn_predict(Learned *o, PyObject *args) {
    long layer;
    long long step, d;
    if (!PyArg_ParseTuple(args, "lLL:predict", &layer, &step, &d)) return NULL;
    if (layer < 0 || layer >= o->L || d < 0 || d > LRN_STEP_MAX || step < -LRN_STEP_MAX || step > LRN_STEP_MAX) {
        PyErr_Format(PyExc_ValueError, "Learned.predict: layer must be in 0 .. %ld, 0 <= d <= 2^62 and "
                     "|step| at most 2^62", o->L - 1);
        return NULL;
    }
    int ng = lrn_predict_core(o, layer, step, d);
    if (ng < 0) return NULL;
    /* the ids out of the scratch before any Python object is made (an allocation may run a
     * finalizer, which may call this object again) */
    int *ids = malloc(sizeof(int) * (ng > 0 ? (size_t)ng : 1));
    if (!ids) return PyErr_NoMemory();
    for (int i = 0; i < ng; i++) ids[i] = o->sc_pe[i].e;
    PyObject *out = PyList_New(ng);
    if (!out) { free(ids); return NULL; }
    for (int i = 0; i < ng; i++) {
        PyObject *v = PyLong_FromLong(ids[i]);
        if (!v) { Py_DECREF(out); free(ids); return NULL; }
        PyList_SET_ITEM(out, i, v);
    }
    free(ids);
    return out;
}

/* ------------------------------------------------------------------ dump */
static PyObject *lrn_get_theta(Learned *o, void *c);

static PyObject *ints_tuple(const int *v, int n) {
    PyObject *t = PyTuple_New(n);
    if (!t) return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *x = PyLong_FromLong(v[i]);
        if (!x) { Py_DECREF(t); return NULL; }
        PyTuple_SET_ITEM(t, i, x);
    }
    return t;
}

static PyObject *doubles_tuple(const double *v, int n) {
    PyObject *t = PyTuple_New(n);
    if (!t) return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *x = PyFloat_FromDouble(v[i]);
        if (!x) { Py_DECREF(t); return NULL; }
        PyTuple_SET_ITEM(t, i, x);
    }
    return t;
}

/* d[key] = value (value's reference stolen); -1 with an exception */
static int put(PyObject *d, const char *key, PyObject *value) {
    if (!value) return -1;
    int r = PyDict_SetItemString(d, key, value);
    Py_DECREF(value);
    return r;
}

static PyObject *lrn_dump(Learned *o, PyObject *unused) {
    long L = o->L, E = o->E;
    PyObject *d = PyDict_New(), *rows = NULL, *cur = NULL, *prev = NULL, *freq = NULL, *fs = NULL;
    PyObject *pend = NULL, *gate = NULL;
    if (!d) return NULL;
    if (put(d, "theta", lrn_get_theta(o, NULL)) < 0) goto bad;
    if (put(d, "window", PyLong_FromLong(o->window)) < 0 || put(d, "confidence", PyFloat_FromDouble(o->confidence)) < 0 ||
        put(d, "rate", PyFloat_FromDouble(o->rate)) < 0) goto bad;
    if (!(rows = PyList_New(0))) goto bad;
    for (int dd = 1; dd <= o->maxd; dd++)
        for (long src = 0; src < L; src++)
            for (long x = 0; x < E; x++) {
                const LRow *r = o->rows[((size_t)(dd - 1) * L + src) * E + x];
                if (!r) continue;
                PyObject *ents = PyTuple_New(r->len);
                if (!ents) goto bad;
                for (int j = 0; j < r->len; j++) {
                    PyObject *p = Py_BuildValue("(id)", r->ent[j].e, r->ent[j].c);
                    if (!p) { Py_DECREF(ents); goto bad; }
                    PyTuple_SET_ITEM(ents, j, p);
                }
                PyObject *item = Py_BuildValue("((ill)LN)", dd, src, x, r->n, ents);
                if (!item || PyList_Append(rows, item) < 0) { Py_XDECREF(item); goto bad; }
                Py_DECREF(item);
            }
    if (PyDict_SetItemString(d, "rows", rows) < 0) goto bad;
    if (!(cur = PyList_New(L)) || !(prev = PyList_New(L)) || !(freq = PyList_New(L)) || !(fs = PyList_New(L))) goto bad;
    for (long l = 0; l < L; l++) {
        PyObject *c;
        if (!o->cur_has[l]) { c = Py_None; Py_INCREF(c); }
        else {
            PyObject *ex = ints_tuple(o->cur_e + (size_t)l * E, o->cur_n[l]);
            PyObject *ws = !ex ? NULL : o->cur_hasw[l] ? doubles_tuple(o->cur_w + (size_t)l * E, o->cur_n[l])
                                                        : (Py_INCREF(Py_None), Py_None);
            c = ws ? Py_BuildValue("(LNN)", o->cur_step[l], ex, ws) : NULL;
            if (!ws) Py_XDECREF(ex);
            if (!c) goto bad;
        }
        PyList_SET_ITEM(cur, l, c);
        PyObject *p = o->prev_n[l] < 0 ? (Py_INCREF(Py_None), Py_None) : ints_tuple(o->prev_e + (size_t)l * E, o->prev_n[l]);
        if (!p) goto bad;
        PyList_SET_ITEM(prev, l, p);
        const double *f = o->freq + (size_t)l * E;
        int nz = 0;
        for (long e = 0; e < E; e++) if (f[e] != 0.0) nz++;
        PyObject *ft = PyTuple_New(nz);
        if (!ft) goto bad;
        for (long e = 0, i = 0; e < E; e++) {
            if (f[e] == 0.0) continue;
            PyObject *p2 = Py_BuildValue("(ld)", e, f[e]);
            if (!p2) { Py_DECREF(ft); goto bad; }
            PyTuple_SET_ITEM(ft, i++, p2);
        }
        PyList_SET_ITEM(freq, l, ft);
        PyObject *s = PyFloat_FromDouble(o->fscale[l]);
        if (!s) goto bad;
        PyList_SET_ITEM(fs, l, s);
    }
    if (PyDict_SetItemString(d, "cur", cur) < 0 || PyDict_SetItemString(d, "prev", prev) < 0 ||
        PyDict_SetItemString(d, "freq", freq) < 0 || PyDict_SetItemString(d, "fscale", fs) < 0) goto bad;
    if (!(pend = PyDict_New()) || !(gate = PyDict_New())) goto bad;
    for (long l = 0; l < L; l++) {
        if (o->pd_has[l]) {
            int n = o->pd_n[l];
            PyObject *cs = PyTuple_New(n);
            if (!cs) goto bad;
            for (int c = 0; c < n; c++) {
                PyObject *fv = doubles_tuple(o->pd_f[l] + (size_t)c * o->nf, o->nf);
                PyObject *it = fv ? Py_BuildValue("(iNd)", o->pd_e[l][c], fv, o->pd_p[l][c]) : NULL;
                if (!it) { Py_DECREF(cs); goto bad; }
                PyTuple_SET_ITEM(cs, c, it);
            }
            PyObject *k = PyLong_FromLong(l), *v = Py_BuildValue("(LN)", o->pd_step[l], cs);
            int r = (!k || !v) ? -1 : PyDict_SetItem(pend, k, v);
            Py_XDECREF(k); Py_XDECREF(v);
            if (r < 0) goto bad;
        }
        if (o->gt_has[l]) {
            PyObject *ids = ints_tuple(o->gt_e + (size_t)l * E, o->gt_n[l]);
            PyObject *k = PyLong_FromLong(l), *v = ids ? Py_BuildValue("(LN)", o->gt_step[l], ids) : NULL;
            int r = (!k || !v) ? -1 : PyDict_SetItem(gate, k, v);
            Py_XDECREF(k); Py_XDECREF(v);
            if (r < 0) goto bad;
        }
    }
    if (PyDict_SetItemString(d, "pending", pend) < 0 || PyDict_SetItemString(d, "gate", gate) < 0) goto bad;
    Py_DECREF(rows); Py_DECREF(cur); Py_DECREF(prev); Py_DECREF(freq); Py_DECREF(fs);
    Py_DECREF(pend); Py_DECREF(gate);
    return d;
bad:
    Py_XDECREF(d); Py_XDECREF(rows); Py_XDECREF(cur); Py_XDECREF(prev); Py_XDECREF(freq);
    Py_XDECREF(fs); Py_XDECREF(pend); Py_XDECREF(gate);
    return NULL;
}

/* ------------------------------------------------------------------ attributes */
static PyObject *lrn_get_window(Learned *o, void *c) { return PyLong_FromLong(o->window); }
static int lrn_set_window(Learned *o, PyObject *v, void *c) {
    if (!v || !PyLong_Check(v)) { PyErr_SetString(PyExc_TypeError, "Learned.window must be an int"); return -1; }
    int of = 0;
    long long w = PyLong_AsLongLongAndOverflow(v, &of);
    if (w == -1 && PyErr_Occurred()) return -1;
    o->window = of > 0 ? LONG_MAX : clamp1(w);
    return 0;
}

static int set_double(PyObject *v, double *out, const char *what) {
    if (!v) { PyErr_Format(PyExc_TypeError, "Learned.%s cannot be deleted", what); return -1; }
    double x = PyFloat_AsDouble(v);
    if (x == -1.0 && PyErr_Occurred()) return -1;
    *out = x;
    return 0;
}
static PyObject *lrn_get_conf(Learned *o, void *c) { return PyFloat_FromDouble(o->confidence); }
static int lrn_set_conf(Learned *o, PyObject *v, void *c) { return set_double(v, &o->confidence, "confidence"); }
static PyObject *lrn_get_rate(Learned *o, void *c) { return PyFloat_FromDouble(o->rate); }
static int lrn_set_rate(Learned *o, PyObject *v, void *c) { return set_double(v, &o->rate, "rate"); }

static PyObject *lrn_get_theta(Learned *o, void *c) {
    PyObject *t = doubles_tuple(o->theta, o->nf);
    if (!t) return NULL;
    PyObject *l = PySequence_List(t);
    Py_DECREF(t);
    return l;
}
static int lrn_set_theta(Learned *o, PyObject *v, void *c) {
    if (!v) { PyErr_SetString(PyExc_TypeError, "Learned.theta cannot be deleted"); return -1; }
    PyObject *seq = PySequence_Fast(v, "Learned.theta must be a sequence of numbers");
    if (!seq) return -1;
    if (PySequence_Fast_GET_SIZE(seq) != o->nf) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "Learned.theta must have %d numbers", o->nf);
        return -1;
    }
    double tmp[1028];                       /* nf <= 1024 + 4 */
    for (int j = 0; j < o->nf; j++) {
        PyObject *x = PySequence_Fast_GET_ITEM(seq, j);
        if (!PyFloat_Check(x) && !PyLong_Check(x)) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_TypeError, "Learned.theta must be numbers");
            return -1;
        }
        tmp[j] = PyFloat_Check(x) ? PyFloat_AS_DOUBLE(x) : PyLong_AsDouble(x);
        if (tmp[j] == -1.0 && PyErr_Occurred()) { Py_DECREF(seq); return -1; }
    }
    Py_DECREF(seq);
    memcpy(o->theta, tmp, sizeof(double) * (size_t)o->nf);
    return 0;
}

#define LRN_RO(name, field, conv) \
    static PyObject *lrn_get_##name(Learned *o, void *c) { return conv(o->field); }
LRN_RO(L, L, PyLong_FromLong)
LRN_RO(E, E, PyLong_FromLong)
LRN_RO(context, context, PyLong_FromLong)
LRN_RO(row_cap, row_cap, PyLong_FromLong)
LRN_RO(maxd, maxd, PyLong_FromLong)

static PyGetSetDef lrn_getset[] = {
    {"window", (getter)lrn_get_window, (setter)lrn_set_window, "passes the frequencies average over; rows halve at 2 x window", NULL},
    {"confidence", (getter)lrn_get_conf, (setter)lrn_set_conf, "the least probability a prediction returns", NULL},
    {"rate", (getter)lrn_get_rate, (setter)lrn_set_rate, "the logistic model's learning rate", NULL},
    {"theta", (getter)lrn_get_theta, (setter)lrn_set_theta, "the logistic model's weights (a copy)", NULL},
    {"L", (getter)lrn_get_L, NULL, "layers", NULL},
    {"E", (getter)lrn_get_E, NULL, "experts per layer", NULL},
    {"context", (getter)lrn_get_context, NULL, "context layers a prediction reads", NULL},
    {"row_cap", (getter)lrn_get_row_cap, NULL, "targets a row keeps when cut back", NULL},
    {"maxd", (getter)lrn_get_maxd, NULL, "the farthest distance the rows keep", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef lrn_methods[] = {
    {"observe", (PyCFunction)(void (*)(void))lrn_observe, METH_VARARGS | METH_KEYWORDS,
     "observe(layer, step, experts, weights=None, predictions=None): layer's dispatch of step "
     "selected experts (distinct ids; their router weights; the caller's speculative "
     "predictions for later layers)"},
    {"predict", (PyCFunction)lrn_predict, METH_VARARGS,
     "predict(layer, step, d): experts predicted for layer + d, most probable first"},
    {"dump", (PyCFunction)lrn_dump, METH_NOARGS, "the whole state, as Learned.dump() gives it"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject LearnedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mpl.runtime._fast.Learned",
    .tp_basicsize = sizeof(Learned),
    .tp_dealloc = (destructor)lrn_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_methods = lrn_methods,
    .tp_getset = lrn_getset,
    .tp_doc = "Learned(num_layers, num_experts, context, window, confidence, depth, row_cap=16): "
              "mpl.runtime.prefetch.Learned in C (the same predictions and state).",
    .tp_new = lrn_new,
};

static int lrn_init_module(PyObject *m) {
    if (PyType_Ready(&LearnedType) < 0) return -1;
    Py_INCREF(&LearnedType);
    if (PyModule_AddObject(m, "Learned", (PyObject *)&LearnedType) < 0) { Py_DECREF(&LearnedType); return -1; }
    return PyModule_AddIntConstant(m, "LEARNED_MAX_KEYS", LRN_MAX_KEYS);
}
