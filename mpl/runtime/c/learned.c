/* The learned next-layer predictor (learned.h): mpl.runtime.prefetch.Learned in C.
 *
 * The same model, the same arithmetic in the same order, so that both give the same
 * predictions and the same state for the same calls (tests/test_learned_backends.py compares
 * their dump()s after random call sequences): per (distance, source layer, source expert) a
 * row of target counts kept in the dict's insertion order (a new target at the end; cut back
 * to its row_cap largest counts, ties to the lower id, in that order; halved, in place,
 * dropping what falls below 0.5); per layer the experts and normalised router weights of its
 * current dispatch and the experts of its previous one; a moving frequency per layer and
 * expert (dense here, a dict there: an absent entry reads 0.0); the candidates of a prediction
 * in the order the dict there makes them (the nearest context layer's targets as first met,
 * then the next one's, then the layer's recent experts, then the caller's speculative ones),
 * each with its feature vector and probability, kept until the target layer's routing
 * arrives; the logistic model's weights updated candidate by candidate in that order. Sums run
 * left to right, as the Python reference writes them.
 *
 * Calls and Python code. The Python methods first turn their arguments into C arrays (what may
 * run Python code: an iterable's __iter__, a mapping's items(), __index__), then call the
 * engine's entry points (lrn_observe, lrn_predict), which check everything before they change
 * anything, allocate what they need before they change anything (a row is made, or grown,
 * first; an empty row is not part of the state), and run no Python code. dump() copies the
 * whole state into C memory first (no Python object is made while it reads), then builds the
 * Python objects from that copy: a finalizer the allocation runs, or another thread that
 * runs meanwhile, may call the predictor, and changes nothing dump() returns.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "learned.h"

/* memcpy of n bytes, nothing when n is 0 (a buffer never allocated may be NULL then) */
static inline void cpy(void *dst, const void *src, size_t n) { if (n) memcpy(dst, src, n); }

typedef struct { int e; double c; } LEnt;
typedef struct { double p; int e; } PE;   /* a candidate's probability */
typedef struct { long long n; int len, cap; LEnt *ent; } LRow;   /* n == 0: not in the state */

struct Learned {
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
    int *pd_n, *pd_cap;
    int **pd_e;
    double **pd_f, **pd_p;        /* per target layer: its candidates, features, probabilities */
    char *gt_has;
    long long *gt_step;
    int *gt_n, *gt_e;             /* L, L * E */
    int *mark;                    /* E: 1 + candidate index while features() runs, 1 + a
                                   * target's index in a row while count() runs; else 0 */
    char *got;                    /* E */
    char *lseen;                  /* L: the layers of an observe's predictions */
    int *sc_e;                    /* E: the candidates being made */
    double *sc_f, *sc_p;          /* E * nf, E */
    int *arg_e;                   /* E: an observe's experts */
    double *arg_w;                /* E */
    PE *sc_pe;                    /* E: a prediction's candidates, sorted */
    int *out_ids;                 /* E: what lrn_predict hands out */
};

/* The object's arrays in one table: where each pointer lives, its item size, how many items
 * (per layer, expert, key, feature, expert and feature, row) and what it holds: 1 state (dump
 * copies it), 2 state behind pointers (rows; per layer a pending prediction's arrays: dump
 * copies what they point to), 0 scratch. Every one is made zeroed. */
enum { N_L, N_E, N_K, N_NF, N_ENF, N_ROWS };
#define ARR(field, type, n, kind) {offsetof(Learned, field), sizeof(type), n, kind}
static const struct { size_t off, item; int n, kind; } ARRAYS[] = {
    ARR(rows, LRow *, N_ROWS, 2), ARR(theta, double, N_NF, 1), ARR(cur_has, char, N_L, 1),
    ARR(cur_hasw, char, N_L, 1), ARR(cur_step, long long, N_L, 1), ARR(cur_n, int, N_L, 1),
    ARR(cur_e, int, N_K, 1), ARR(cur_w, double, N_K, 1), ARR(prev_n, int, N_L, 1),
    ARR(prev_e, int, N_K, 1), ARR(freq, double, N_K, 1), ARR(fscale, double, N_L, 1),
    ARR(pd_has, char, N_L, 1), ARR(pd_step, long long, N_L, 1), ARR(pd_n, int, N_L, 1),
    ARR(pd_cap, int, N_L, 1), ARR(pd_e, int *, N_L, 2), ARR(pd_f, double *, N_L, 2),
    ARR(pd_p, double *, N_L, 2), ARR(gt_has, char, N_L, 1), ARR(gt_step, long long, N_L, 1),
    ARR(gt_n, int, N_L, 1), ARR(gt_e, int, N_K, 1),
    ARR(mark, int, N_E, 0), ARR(got, char, N_E, 0), ARR(lseen, char, N_L, 0), ARR(sc_e, int, N_E, 0),
    ARR(sc_f, double, N_ENF, 0), ARR(sc_p, double, N_E, 0), ARR(arg_e, int, N_E, 0),
    ARR(arg_w, double, N_E, 0), ARR(sc_pe, PE, N_E, 0), ARR(out_ids, int, N_E, 0),
};
#define NARRAYS ((int)(sizeof(ARRAYS) / sizeof(ARRAYS[0])))

static inline void **arr_at(const Learned *o, int i) { return (void **)((char *)o + ARRAYS[i].off); }

/* array i's items (the shape was checked: L * E, maxd * L * E <= 2^22, nf <= 1028) */
static size_t arr_len(const Learned *o, int i) {
    size_t L = (size_t)o->L, E = (size_t)o->E, nf = (size_t)o->nf;
    switch (ARRAYS[i].n) {
    case N_L: return L;
    case N_E: return E;
    case N_K: return L * E;
    case N_NF: return nf;
    case N_ENF: return E > SIZE_MAX / sizeof(double) / nf ? SIZE_MAX : E * nf;   /* (calloc refuses) */
    default: return (size_t)o->maxd * L * E;
    }
}

/* frees what the arrays hold and point to (each may be missing: a failed make or copy) */
static void lrn_free_all(Learned *o) {
    if (o->rows) {
        size_t n = (size_t)o->maxd * o->L * o->E;
        for (size_t i = 0; i < n; i++)
            if (o->rows[i]) { free(o->rows[i]->ent); free(o->rows[i]); }
    }
    for (long l = 0; l < o->L; l++) {
        if (o->pd_e) free(o->pd_e[l]);
        if (o->pd_f) free(o->pd_f[l]);
        if (o->pd_p) free(o->pd_p[l]);
    }
    for (int i = 0; i < NARRAYS; i++) { free(*arr_at(o, i)); *arr_at(o, i) = NULL; }
}

static void lrn_dealloc(Learned *o) {
    lrn_free_all(o);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

static long clamp1(long long v) { return v < 1 ? 1 : (v > LONG_MAX ? LONG_MAX : (long)v); }

/* an int argument (anything with __index__), saturated to the 64 bits: 0, -1 with an exception */
static int int_arg(PyObject *x, long long *out) {
    PyObject *i = PyNumber_Index(x);
    if (!i) return -1;
    int of = 0;
    long long v = PyLong_AsLongLongAndOverflow(i, &of);
    Py_DECREF(i);
    if (v == -1 && PyErr_Occurred()) return -1;
    *out = of > 0 ? LLONG_MAX : of < 0 ? LLONG_MIN : v;
    return 0;
}

static PyObject *lrn_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"num_layers", "num_experts", "context", "window", "confidence",
                             "depth", "row_cap", NULL};
    long long L, E, context, window, depth, row_cap = 16;
    PyObject *ctx_o, *win_o, *depth_o, *cap_o = NULL;
    double confidence;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "LLOOdO|O:Learned", kwlist, &L, &E, &ctx_o,
                                     &win_o, &confidence, &depth_o, &cap_o))
        return NULL;
    if (int_arg(ctx_o, &context) < 0 || int_arg(win_o, &window) < 0 || int_arg(depth_o, &depth) < 0 ||
            (cap_o && int_arg(cap_o, &row_cap) < 0))
        return NULL;
    /* every size checked before it is multiplied */
    if (L < 1 || E < 1 || L > LRN_MAX_KEYS || E > LRN_MAX_KEYS || L * E > LRN_MAX_KEYS) {
        PyErr_Format(PyExc_ValueError, "Learned: %lld layers x %lld experts is outside 1 .. %ld keys",
                     L, E, LRN_MAX_KEYS);
        return NULL;
    }
    context = clamp1(context);                 /* max(1, int(context)) */
    row_cap = clamp1(row_cap);
    depth = clamp1(depth);
    if (context > 1024 || row_cap > (1 << 20)) {
        PyErr_SetString(PyExc_ValueError, "Learned: context (at most 1024) or row_cap (at most 2^20) too large");
        return NULL;
    }
    /* maxd = min(L, depth + context - 1), without forming the sum when depth >= L */
    long long maxd = depth >= L ? L : depth + context - 1;     /* depth < L <= 2^22 here */
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
    for (int i = 0; i < NARRAYS; i++) {
        size_t n = arr_len(o, i);
        if (!(*arr_at(o, i) = calloc(n ? n : 1, ARRAYS[i].item))) {
            Py_DECREF(o);
            return PyErr_NoMemory();
        }
    }
    for (long l = 0; l < L; l++) { o->prev_n[l] = -1; o->fscale[l] = 1.0; }
    o->theta[0] = 2.0;                 /* prior: the nearest layer's transitions, the last pass */
    o->theta[o->context] = 1.0;
    o->theta[o->nf - 1] = -2.0;
    return (PyObject *)o;
}

/* ------------------------------------------------------------------ rows */
static inline LRow **row_tab(const Learned *o, int d, long src) {
    return o->rows + ((size_t)(d - 1) * (size_t)o->L + (size_t)src) * (size_t)o->E;
}

/* static int NAME(T *a, int n, long k), k >= 1: a[0..m) := the first m = min(k, n) of
 * a[0..n) in BEFORE's order, sorted, in place (a total order: the first m of a full sort),
 * by a selection: each entry is read before anything below it is written; -> m */
#define FIRST_DEFINE(NAME, T, BEFORE)                                                         \
    static int NAME(T *a, int n, long k) {                                                    \
        int m = 0;                                                                            \
        for (int j = 0; j < n; j++) {                                                         \
            T x = a[j];                                                                       \
            if (m == k && !BEFORE(&x, &a[k - 1])) continue;                                   \
            int q = m < k ? m : (int)k - 1;                                                   \
            while (q > 0 && BEFORE(&x, &a[q - 1])) { a[q] = a[q - 1]; q--; }                 \
            a[q] = x;                                                                         \
            if (m < k) m++;                                                                   \
        }                                                                                     \
        return m;                                                                             \
    }

static inline int lent_before(const LEnt *x, const LEnt *y) {   /* counts descending, then ids */
    return x->c > y->c || (x->c == y->c && x->e < y->e);
}

static int lent_cmp(const void *a, const void *b) {
    return lent_before(a, b) ? -1 : lent_before(b, a) ? 1 : 0;
}

FIRST_DEFINE(lent_first, LEnt, lent_before)

/* a[0..k) := the first k of a[0..n) in lent_before's order, sorted (ids are distinct in a
 * row): for a small k a selection, else a sort */
static void lent_keep(LEnt *a, int n, int k) {
    if (k > 64) qsort(a, (size_t)n, sizeof(LEnt), lent_cmp);
    else lent_first(a, n, k);
}

/* room for nt more targets in every row the dispatch of `layer` in `step` will count into
 * (rows made empty where missing: an empty row is not part of the state); -1: out of memory,
 * nothing observable changed */
static int lrn_reserve(Learned *o, long layer, long long step, long nt) {
    for (int d = 1; d <= o->maxd; d++) {
        long src = layer - d;
        long long src_step = step;
        if (src < 0) { src += o->L; src_step = step - 1; }
        if (!o->cur_has[src] || o->cur_step[src] != src_step) continue;
        LRow **tab = row_tab(o, d, src);
        const int *xs = o->cur_e + (size_t)src * o->E;
        for (int i = 0; i < o->cur_n[src]; i++) {
            LRow *r = tab[xs[i]];
            if (!r) {
                if (!(r = calloc(1, sizeof(LRow)))) return -1;
                tab[xs[i]] = r;
            }
            long need = (long)r->len + nt;
            if (need > r->cap) {
                long nc = (long)r->cap * 2;
                if (nc < need) nc = need;
                if (nc < 8) nc = 8;
                LEnt *ne = realloc(r->ent, sizeof(LEnt) * (size_t)nc);
                if (!ne) return -1;
                r->ent = ne;
                r->cap = (int)nc;
            }
        }
    }
    return 0;
}

/* Learned._count: sources' rows at distance d from src learn the targets (room reserved) */
static void lrn_count(Learned *o, int d, long src, const int *sources, int ns, const int *targets, int nt) {
    LRow **tab = row_tab(o, d, src);
    int cap = o->row_cap;
    int *pos = o->mark;               /* 1 + a target's index in the row (0 between calls) */
    for (int i = 0; i < ns; i++) {
        LRow *r = tab[sources[i]];
        r->n++;
        for (int j = 0; j < r->len; j++) pos[r->ent[j].e] = j + 1;
        for (int j = 0; j < nt; j++) {
            int at = pos[targets[j]] - 1;
            if (at >= 0) r->ent[at].c = r->ent[at].c + 1.0;
            else { r->ent[r->len].e = targets[j]; r->ent[r->len].c = 1.0; pos[targets[j]] = ++r->len; }
        }
        for (int j = 0; j < r->len; j++) pos[r->ent[j].e] = 0;
        if (r->len > 2 * (long)cap) {          /* keep the cap largest counts (ties: lower id) */
            lent_keep(r->ent, r->len, cap);
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
int lrn_observe(Learned *o, long layer, int64_t step, const long *ex, long n, const double *w,
                const GateArg *gates, long ng) {
    /* the checks, before anything changes */
    if (layer < 0 || layer >= o->L || step < -LRN_STEP_MAX || step > LRN_STEP_MAX) {
        PyErr_Format(PyExc_ValueError, "Learned.observe: layer must be in 0 .. %ld and |step| at most 2^62",
                     o->L - 1);
        return -1;
    }
    if (n < 0 || n > o->E || ng < 0 || ng > o->L) {
        PyErr_SetString(PyExc_ValueError, "Learned.observe: more experts or predicted layers than the shape has");
        return -1;
    }
    const char *bad = NULL;
    long m = 0;
    for (; m < n; m++) {
        long e = ex[m];
        if (e < 0 || e >= o->E) { bad = "experts must be in range"; break; }
        if (o->got[e]) { bad = "experts must be distinct"; break; }
        o->got[e] = 1;
    }
    for (long i = 0; i < m; i++) o->got[ex[i]] = 0;
    for (long i = 0; !bad && i < ng; i++) {
        long t = gates[i].t;
        if (t < 0 || t >= o->L) { bad = "a predicted layer must be in range"; break; }
        if (o->lseen[t]) { bad = "predicted layers must be distinct"; break; }
        o->lseen[t] = 1;
        if (gates[i].st != (t > layer ? step : step + 1)) { bad = "a prediction's step must be the one observe gives it"; break; }
        if (gates[i].n < 0 || (gates[i].n && !gates[i].ids)) { bad = "a prediction's ids are missing"; break; }
        for (long j = 0; j < gates[i].n; j++)
            if (gates[i].ids[j] < 0 || gates[i].ids[j] >= o->E) { bad = "predicted experts must be in range"; break; }
    }
    for (long i = 0; i < ng; i++) if (gates[i].t >= 0 && gates[i].t < o->L) o->lseen[gates[i].t] = 0;
    if (bad) {
        PyErr_Format(PyExc_ValueError, "Learned.observe: %s", bad);
        return -1;
    }
    /* room for the counts, before anything changes */
    if (lrn_reserve(o, layer, step, n) < 0) { PyErr_NoMemory(); return -1; }
    /* from here on nothing fails */
    for (long i = 0; i < n; i++) o->arg_e[i] = (int)ex[i];
    int hasw = 0;
    double total = 0.0;
    if (w) {
        for (long i = 0; i < n; i++) { o->arg_w[i] = w[i]; total += w[i]; }   /* left to right */
        hasw = total > 0;
    }
    /* learn from the prediction made for this layer */
    if (o->pd_has[layer]) {
        o->pd_has[layer] = 0;
        if (o->pd_step[layer] == step) {
            for (long i = 0; i < n; i++) o->got[o->arg_e[i]] = 1;
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
            for (long i = 0; i < n; i++) o->got[o->arg_e[i]] = 0;
        }
    }
    for (int d = 1; d <= o->maxd; d++) {
        long src = layer - d;
        long long src_step = step;
        if (src < 0) { src += o->L; src_step = step - 1; }
        if (o->cur_has[src] && o->cur_step[src] == src_step)
            lrn_count(o, d, src, o->cur_e + (size_t)src * o->E, o->cur_n[src], o->arg_e, (int)n);
    }
    lrn_frequency(o, layer, o->arg_e, (int)n);
    size_t base = (size_t)layer * o->E;
    if (o->cur_has[layer]) {
        cpy(o->prev_e + base, o->cur_e + base, sizeof(int) * (size_t)o->cur_n[layer]);
        o->prev_n[layer] = o->cur_n[layer];
    } else o->prev_n[layer] = -1;
    o->cur_has[layer] = 1;
    o->cur_step[layer] = step;
    o->cur_n[layer] = (int)n;
    cpy(o->cur_e + base, o->arg_e, sizeof(int) * (size_t)n);
    o->cur_hasw[layer] = (char)hasw;
    if (hasw) for (long i = 0; i < n; i++) o->cur_w[base + i] = o->arg_w[i] / total;
    for (long i = 0; i < ng; i++) {
        long t = gates[i].t;
        int *dst = o->gt_e + (size_t)t * o->E, k = 0;
        for (long j = 0; j < gates[i].n; j++) {   /* dict.fromkeys: the first of each id */
            int e = (int)gates[i].ids[j];
            if (o->got[e]) continue;
            o->got[e] = 1;
            dst[k++] = e;
        }
        for (int j = 0; j < k; j++) o->got[dst[j]] = 0;
        o->gt_has[t] = 1;
        o->gt_step[t] = gates[i].st;
        o->gt_n[t] = k;
    }
    return 0;
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
        LRow **tab = row_tab(o, d, src);
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

static inline int pe_before(const PE *x, const PE *y) {    /* probability descending, then ids */
    return x->p > y->p || (x->p == y->p && x->e < y->e);
}

static int pe_cmp(const void *a, const void *b) {
    return pe_before(a, b) ? -1 : pe_before(b, a) ? 1 : 0;
}

FIRST_DEFINE(pe_select, PE, pe_before)

/* the pending prediction for t: room for cnt candidates (nothing changes when there is none) */
static int lrn_pending_room(Learned *o, long t, int cnt) {
    if (cnt <= o->pd_cap[t]) return 0;
    size_t nf = (size_t)o->nf;
    int *ne = realloc(o->pd_e[t], sizeof(int) * (size_t)cnt);
    if (!ne) return -1;
    o->pd_e[t] = ne;
    double *nfv = realloc(o->pd_f[t], sizeof(double) * (size_t)cnt * nf);
    if (!nfv) return -1;
    o->pd_f[t] = nfv;
    double *np = realloc(o->pd_p[t], sizeof(double) * (size_t)cnt);
    if (!np) return -1;
    o->pd_p[t] = np;
    o->pd_cap[t] = cnt;
    return 0;
}

/* the first top of good[0..ng) in pe_cmp's order, in place, sorted (a total order: the
 * first top of a full sort); -> their number */
static int pe_first(PE *good, int ng, long top) {
    if (top < 0 || top >= ng) {
        qsort(good, (size_t)ng, sizeof(PE), pe_cmp);
        return ng;
    }
    return top == 0 ? 0 : pe_select(good, ng, top);
}

long lrn_predict(Learned *o, long layer, int64_t step, int64_t d, long top, const int **ids) {
    if (layer < 0 || layer >= o->L || d < 0 || d > LRN_STEP_MAX || step < -LRN_STEP_MAX || step > LRN_STEP_MAX) {
        PyErr_Format(PyExc_ValueError, "Learned.predict: layer must be in 0 .. %ld, 0 <= d <= 2^62 and "
                     "|step| at most 2^62", o->L - 1);
        return -1;
    }
    long long tt = (long long)layer + d;       /* < 2^62 + 2^22 */
    long long q = tt / o->L;                   /* the passes d wraps: 0 <= q <= tt */
    /* the target's step: at most one pass past 2^62 (a dispatch at the last step a runtime
     * takes predicts for the next pass); (LRN_STEP_MAX + 1 - q >= -2^62: no overflow) */
    if (step > LRN_STEP_MAX + 1 - q) {
        PyErr_SetString(PyExc_ValueError, "Learned.predict: the target's step is beyond 2^62 + 1");
        return -1;
    }
    long long st = step + q;
    long t = (long)(tt % o->L);
    int cnt = lrn_features(o, t, st), nf = o->nf;
    if (lrn_pending_room(o, t, cnt) < 0) { PyErr_NoMemory(); return -1; }
    /* from here on nothing fails */
    const double *th = o->theta;
    for (int c = 0; c < cnt; c++) {
        const double *f = o->sc_f + (size_t)c * nf;
        double z = 0.0;
        for (int j = 0; j < nf; j++) z += th[j] * f[j];
        o->sc_p[c] = z > -40 ? 1.0 / (1.0 + exp(-z)) : 0.0;
    }
    if (cnt > 0) {                             /* the pending prediction for t */
        cpy(o->pd_e[t], o->sc_e, sizeof(int) * (size_t)cnt);
        cpy(o->pd_f[t], o->sc_f, sizeof(double) * (size_t)cnt * nf);
        cpy(o->pd_p[t], o->sc_p, sizeof(double) * (size_t)cnt);
    }
    o->pd_has[t] = 1;
    o->pd_step[t] = st;
    o->pd_n[t] = cnt;
    PE *good = o->sc_pe;
    int ng = 0;
    for (int c = 0; c < cnt; c++)
        if (o->sc_p[c] >= o->confidence) { good[ng].p = o->sc_p[c]; good[ng].e = o->sc_e[c]; ng++; }
    ng = pe_first(good, ng, top);
    for (int i = 0; i < ng; i++) o->out_ids[i] = good[i].e;
    *ids = o->out_ids;
    return ng;
}

void lrn_set_window(Learned *o, long window) { o->window = window < 1 ? 1 : window; }
void lrn_set_confidence(Learned *o, double confidence) { o->confidence = confidence; }
long lrn_layers(const Learned *o) { return o->L; }
long lrn_experts(const Learned *o) { return o->E; }

/* ------------------------------------------------------------------ the Python methods */
/* ids of a sequence (a PySequence_Fast result) into buf (room for at most cap): their count,
 * -1 with an exception (TypeError: not ints; ValueError: out of range, or more than cap) */
static Py_ssize_t ids_of(PyObject *seq, long *buf, Py_ssize_t cap, long E, const char *what) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > cap) {
        PyErr_Format(PyExc_ValueError, "Learned: %s must be distinct ids in 0 .. %ld", what, E - 1);
        return -1;
    }
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = items[i];
        if (!PyLong_Check(x)) {        /* (an int, or a subclass: read without __index__) */
            PyErr_Format(PyExc_TypeError, "Learned: %s must be ints, not %.80s", what, Py_TYPE(x)->tp_name);
            return -1;
        }
        int of = 0;
        long e = PyLong_AsLongAndOverflow(x, &of);
        if (e == -1 && PyErr_Occurred()) return -1;
        if (of || e < 0 || e >= E) {
            PyErr_Format(PyExc_ValueError, "Learned: %s must be in 0 .. %ld", what, E - 1);
            return -1;
        }
        buf[i] = e;
    }
    return n;
}

/* a number read without running Python code (a float or an int, or a subclass): 0, -1 with
 * TypeError or OverflowError */
static int num_arg(PyObject *x, double *out, const char *what) {
    if (PyFloat_Check(x)) { *out = PyFloat_AS_DOUBLE(x); return 0; }
    if (!PyLong_Check(x)) {
        PyErr_Format(PyExc_TypeError, "Learned: %s must be numbers, not %.80s", what, Py_TYPE(x)->tp_name);
        return -1;
    }
    *out = PyLong_AsDouble(x);
    return *out == -1.0 && PyErr_Occurred() ? -1 : 0;
}

static PyObject *py_observe(Learned *o, PyObject *args, PyObject *kw) {
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
    long L = o->L, E = o->E;
    /* every argument as a sequence first (what may run Python code: an iterable's __iter__, a
     * mapping's items(), __bool__), then read into C arrays; lrn_observe runs no Python code */
    PyObject *ex = NULL, *ws = NULL, *items = NULL, *vals = NULL, *result = NULL;
    long *eids = NULL, *gids = NULL;
    double *wv = NULL;
    GateArg *gates = NULL;
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
            if (ng > L) {                    /* distinct keys: one at least is not a layer */
                PyErr_Format(PyExc_ValueError, "Learned.observe: a predicted layer must be in 0 .. %ld", L - 1);
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
    /* from here on no Python code runs: the C arrays */
    Py_ssize_t n = PySequence_Fast_GET_SIZE(ex);
    if (n > E) {
        PyErr_Format(PyExc_ValueError, "Learned.observe: experts must be distinct ids in 0 .. %ld", E - 1);
        goto done;
    }
    eids = malloc(sizeof(long) * ((size_t)n + 1));
    if (!eids) { PyErr_NoMemory(); goto done; }
    if (ids_of(ex, eids, n, E, "experts") < 0) goto done;
    if (ws) {
        if (PySequence_Fast_GET_SIZE(ws) != n) {
            PyErr_SetString(PyExc_ValueError, "Learned.observe: one weight per expert");
            goto done;
        }
        if (!(wv = malloc(sizeof(double) * ((size_t)n + 1)))) { PyErr_NoMemory(); goto done; }
        PyObject **it = PySequence_Fast_ITEMS(ws);
        for (Py_ssize_t i = 0; i < n; i++)
            if (num_arg(it[i], &wv[i], "weights") < 0) goto done;
    }
    if (ng) {
        Py_ssize_t total = 0;
        for (Py_ssize_t i = 0; i < ng; i++) {
            Py_ssize_t m = PySequence_Fast_GET_SIZE(PyTuple_GET_ITEM(vals, i));
            if (m > PY_SSIZE_T_MAX / 2 - total) { PyErr_NoMemory(); goto done; }
            total += m;
        }
        gates = malloc(sizeof(GateArg) * (size_t)ng);
        gids = (size_t)total < SIZE_MAX / sizeof(long) ? malloc(sizeof(long) * ((size_t)total + 1)) : NULL;
        if (!gates || !gids) { PyErr_NoMemory(); goto done; }
        Py_ssize_t off = 0;
        for (Py_ssize_t i = 0; i < ng; i++) {
            PyObject *kv = PyList_GET_ITEM(items, i), *seq = PyTuple_GET_ITEM(vals, i);
            int of = 0;
            long t = PyLong_AsLongAndOverflow(PyTuple_GET_ITEM(kv, 0), &of);
            if (t == -1 && PyErr_Occurred()) goto done;
            if (of || t < 0 || t >= L) {
                PyErr_Format(PyExc_ValueError, "Learned.observe: a predicted layer must be in 0 .. %ld", L - 1);
                goto done;
            }
            Py_ssize_t m = PySequence_Fast_GET_SIZE(seq);
            if (ids_of(seq, gids + off, m, E, "predicted experts") < 0) goto done;
            gates[i].t = t;
            gates[i].st = t > layer ? step : step + 1;
            gates[i].n = (long)m;
            gates[i].ids = gids + off;
            off += m;
        }
    }
    if (lrn_observe(o, layer, step, eids, (long)n, wv, gates, (long)ng) == 0) {
        Py_INCREF(Py_None);
        result = Py_None;
    }
done:
    free(eids); free(wv); free(gates); free(gids);
    Py_XDECREF(ex); Py_XDECREF(ws); Py_XDECREF(items); Py_XDECREF(vals);
    return result;
}

static PyObject *py_predict(Learned *o, PyObject *args) {
    long layer, top = -1;
    long long step, d;
    PyObject *top_o = Py_None;
    if (!PyArg_ParseTuple(args, "lLL|O:predict", &layer, &step, &d, &top_o)) return NULL;
    if (top_o != Py_None) {                    /* (converted before the state is touched) */
        PyObject *i = PyNumber_Index(top_o);
        if (!i) return NULL;
        int ovf = 0;
        top = PyLong_AsLongAndOverflow(i, &ovf);
        Py_DECREF(i);
        if (top == -1 && PyErr_Occurred()) return NULL;
        if (ovf > 0) top = -1;                 /* (more than any number of candidates: all) */
        else if (ovf < 0 || top < 0) {
            PyErr_SetString(PyExc_ValueError, "Learned.predict: top must be at least 0");
            return NULL;
        }
    }
    const int *got;
    long ng = lrn_predict(o, layer, step, d, top, &got);
    if (ng < 0) return NULL;
    /* the ids out of the object before any Python object is made (an allocation may run a
     * finalizer, which may call this object again) */
    int *ids = malloc(sizeof(int) * (ng > 0 ? (size_t)ng : 1));
    if (!ids) return PyErr_NoMemory();
    cpy(ids, got, sizeof(int) * (size_t)ng);
    PyObject *out = PyList_New(ng);
    if (!out) { free(ids); return NULL; }
    for (long i = 0; i < ng; i++) {
        PyObject *v = PyLong_FromLong(ids[i]);
        if (!v) { Py_DECREF(out); free(ids); return NULL; }
        PyList_SET_ITEM(out, i, v);
    }
    free(ids);
    return out;
}

/* ------------------------------------------------------------------ dump */
/* a copy of o's state in C memory, taken with no Python code running (a plain struct, not a
 * Python object: scratch arrays NULL, no empty rows, a pending prediction's arrays sized to
 * it), for dump() to build the Python objects from; NULL when memory ran out */
static Learned *lrn_copy(const Learned *o) {
    Learned *c = malloc(sizeof(Learned));
    if (!c) return NULL;
    memcpy(c, o, sizeof(Learned));
    for (int i = 0; i < NARRAYS; i++) *arr_at(c, i) = NULL;
    for (int i = 0; i < NARRAYS; i++) {
        if (!ARRAYS[i].kind) continue;
        size_t n = arr_len(o, i);
        if (!(*arr_at(c, i) = calloc(n ? n : 1, ARRAYS[i].item))) goto fail;
        if (ARRAYS[i].kind == 1) cpy(*arr_at(c, i), *arr_at(o, i), n * ARRAYS[i].item);
    }
    for (size_t i = 0, n = (size_t)o->maxd * o->L * o->E; i < n; i++) {
        const LRow *r = o->rows[i];
        if (!r || !r->n) continue;
        LRow *x = c->rows[i] = malloc(sizeof(LRow));
        if (!x) goto fail;
        *x = *r;
        if (!(x->ent = malloc(sizeof(LEnt) * ((size_t)r->len + 1)))) goto fail;
        cpy(x->ent, r->ent, sizeof(LEnt) * (size_t)r->len);
    }
    for (long l = 0; l < o->L; l++) {
        size_t n = o->pd_has[l] ? (size_t)o->pd_n[l] : 0;
        if (!n) continue;
        if (!(c->pd_e[l] = malloc(sizeof(int) * n)) || !(c->pd_f[l] = malloc(sizeof(double) * n * (size_t)o->nf)) ||
                !(c->pd_p[l] = malloc(sizeof(double) * n)))
            goto fail;
        cpy(c->pd_e[l], o->pd_e[l], sizeof(int) * n);
        cpy(c->pd_f[l], o->pd_f[l], sizeof(double) * n * (size_t)o->nf);
        cpy(c->pd_p[l], o->pd_p[l], sizeof(double) * n);
    }
    return c;
fail:
    lrn_free_all(c);
    free(c);
    return NULL;
}

/* a tuple (or a list) of n ints (v: int *) or doubles (v: double *); NULL with an exception */
static PyObject *num_seq(const void *v, long n, int dbl, int list) {
    PyObject *t = list ? PyList_New(n) : PyTuple_New(n);
    for (long i = 0; t && i < n; i++) {
        PyObject *x = dbl ? PyFloat_FromDouble(((const double *)v)[i]) : PyLong_FromLong(((const int *)v)[i]);
        if (!x) Py_CLEAR(t);
        else if (list) PyList_SET_ITEM(t, i, x);
        else PyTuple_SET_ITEM(t, i, x);
    }
    return t;
}

/* d[key] = v (v's reference stolen; key a str, or an int when key is NULL): v, borrowed (d
 * holds it), or NULL with an exception */
static PyObject *put(PyObject *d, const char *key, long ikey, PyObject *v) {
    PyObject *k = !v ? NULL : key ? PyUnicode_FromString(key) : PyLong_FromLong(ikey);
    int r = k ? PyDict_SetItem(d, k, v) : -1;
    Py_XDECREF(k);
    Py_XDECREF(v);
    return r < 0 ? NULL : v;
}

/* Learned.dump() of a copy: rows (d, src, x ascending: the sorted order of the reference's
 * dump), then per layer its current and previous dispatch, frequencies and scale, pending
 * prediction and gate */
static PyObject *dump_of(const Learned *s) {
    long L = s->L, E = s->E;
    int nf = s->nf;
    PyObject *d = PyDict_New(), *rows, *cur, *prev, *freq, *fs, *pend, *gate;
    if (!d || !put(d, "theta", 0, num_seq(s->theta, nf, 1, 1)) || !put(d, "window", 0, PyLong_FromLong(s->window)) ||
            !put(d, "confidence", 0, PyFloat_FromDouble(s->confidence)) ||
            !put(d, "rate", 0, PyFloat_FromDouble(s->rate)) || !(rows = put(d, "rows", 0, PyList_New(0))) ||
            !(cur = put(d, "cur", 0, PyList_New(L))) || !(prev = put(d, "prev", 0, PyList_New(L))) ||
            !(freq = put(d, "freq", 0, PyList_New(L))) || !(fs = put(d, "fscale", 0, PyList_New(L))) ||
            !(pend = put(d, "pending", 0, PyDict_New())) || !(gate = put(d, "gate", 0, PyDict_New())))
        goto bad;
    for (size_t i = 0, n = (size_t)s->maxd * L * E; i < n; i++) {
        const LRow *r = s->rows[i];
        if (!r) continue;
        PyObject *ents = PyTuple_New(r->len);
        for (int j = 0; ents && j < r->len; j++) {
            PyObject *p = Py_BuildValue("(id)", r->ent[j].e, r->ent[j].c);
            if (!p) Py_CLEAR(ents);
            else PyTuple_SET_ITEM(ents, j, p);
        }
        PyObject *item = ents ? Py_BuildValue("((nnn)LN)", (Py_ssize_t)(i / ((size_t)L * E) + 1),
                                              (Py_ssize_t)(i / E % L), (Py_ssize_t)(i % E), r->n, ents) : NULL;
        int rc = item ? PyList_Append(rows, item) : -1;
        Py_XDECREF(item);
        if (rc < 0) goto bad;
    }
    for (long l = 0; l < L; l++) {
        size_t b = (size_t)l * E;
        PyObject *x = Py_NewRef(Py_None);
        if (s->cur_has[l]) {                 /* (step, experts, weights or None) */
            PyObject *ex = num_seq(s->cur_e + b, s->cur_n[l], 0, 0);
            PyObject *ws = !ex ? NULL : s->cur_hasw[l] ? num_seq(s->cur_w + b, s->cur_n[l], 1, 0) : Py_NewRef(Py_None);
            Py_SETREF(x, ws ? Py_BuildValue("(LNN)", s->cur_step[l], ex, ws) : NULL);
            if (!ws) Py_XDECREF(ex);
            if (!x) goto bad;
        }
        PyList_SET_ITEM(cur, l, x);
        x = s->prev_n[l] < 0 ? Py_NewRef(Py_None) : num_seq(s->prev_e + b, s->prev_n[l], 0, 0);
        if (!x) goto bad;
        PyList_SET_ITEM(prev, l, x);
        long nz = 0, k = 0;                  /* the nonzero frequencies: (expert, value) */
        for (long e = 0; e < E; e++) nz += s->freq[b + e] != 0.0;
        if (!(x = PyTuple_New(nz))) goto bad;
        PyList_SET_ITEM(freq, l, x);
        for (long e = 0; e < E; e++) {
            if (s->freq[b + e] == 0.0) continue;
            PyObject *p = Py_BuildValue("(ld)", e, s->freq[b + e]);
            if (!p) goto bad;
            PyTuple_SET_ITEM(x, k++, p);
        }
        if (!(x = PyFloat_FromDouble(s->fscale[l]))) goto bad;
        PyList_SET_ITEM(fs, l, x);
        if (s->pd_has[l]) {                  /* (step, ((expert, features, probability), ...)) */
            PyObject *cs = PyTuple_New(s->pd_n[l]);
            for (int c = 0; cs && c < s->pd_n[l]; c++) {
                PyObject *fv = num_seq(s->pd_f[l] + (size_t)c * nf, nf, 1, 0);
                PyObject *it = fv ? Py_BuildValue("(iNd)", s->pd_e[l][c], fv, s->pd_p[l][c]) : NULL;
                if (!it) Py_CLEAR(cs);
                else PyTuple_SET_ITEM(cs, c, it);
            }
            if (!put(pend, NULL, l, cs ? Py_BuildValue("(LN)", s->pd_step[l], cs) : NULL)) goto bad;
        }
        if (s->gt_has[l]) {                  /* (step, ids) */
            PyObject *ids = num_seq(s->gt_e + b, s->gt_n[l], 0, 0);
            if (!put(gate, NULL, l, ids ? Py_BuildValue("(LN)", s->gt_step[l], ids) : NULL)) goto bad;
        }
    }
    return d;
bad:
    Py_XDECREF(d);
    return NULL;
}

static PyObject *py_dump(Learned *o, PyObject *unused) {
    Learned *c = lrn_copy(o);
    if (!c) return PyErr_NoMemory();
    PyObject *out = dump_of(c);
    lrn_free_all(c);
    free(c);
    return out;
}

/* ------------------------------------------------------------------ attributes */
static PyObject *get_window(Learned *o, void *c) { return PyLong_FromLong(o->window); }
static int set_window(Learned *o, PyObject *v, void *c) {
    if (!v || !PyLong_Check(v)) { PyErr_SetString(PyExc_TypeError, "Learned.window must be an int"); return -1; }
    int of = 0;
    long long w = PyLong_AsLongLongAndOverflow(v, &of);
    if (w == -1 && PyErr_Occurred()) return -1;
    lrn_set_window(o, of > 0 ? LONG_MAX : clamp1(w));     /* (saturated: rows never halve) */
    return 0;
}

/* confidence and rate: a double field (the closure: its offset), set from anything float()
 * takes (__float__ runs before anything changes) */
static PyObject *get_dbl(Learned *o, void *c) { return PyFloat_FromDouble(*(double *)((char *)o + (size_t)c)); }
static int set_dbl(Learned *o, PyObject *v, void *c) {
    if (!v) { PyErr_SetString(PyExc_TypeError, "Learned's attributes cannot be deleted"); return -1; }
    double x = PyFloat_AsDouble(v);
    if (x == -1.0 && PyErr_Occurred()) return -1;
    *(double *)((char *)o + (size_t)c) = x;
    return 0;
}

static PyObject *get_theta(Learned *o, void *c) {
    double tmp[1028];                          /* nf <= 1024 + 4: copied before any allocation */
    cpy(tmp, o->theta, sizeof(double) * (size_t)o->nf);
    return num_seq(tmp, o->nf, 1, 1);
}
static int set_theta(Learned *o, PyObject *v, void *c) {
    if (!v) { PyErr_SetString(PyExc_TypeError, "Learned.theta cannot be deleted"); return -1; }
    PyObject *seq = PySequence_Fast(v, "Learned.theta must be a sequence of numbers");
    if (!seq) return -1;
    if (PySequence_Fast_GET_SIZE(seq) != o->nf) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "Learned.theta must have %d numbers", o->nf);
        return -1;
    }
    double tmp[1028];
    for (int j = 0; j < o->nf; j++) {
        PyObject *x = PySequence_Fast_GET_ITEM(seq, j);
        if (num_arg(x, &tmp[j], "theta") < 0) { Py_DECREF(seq); return -1; }
    }
    Py_DECREF(seq);
    cpy(o->theta, tmp, sizeof(double) * (size_t)o->nf);
    return 0;
}

#define LRN_RO(name, field) \
    static PyObject *get_##name(Learned *o, void *c) { return PyLong_FromLong((long)o->field); }
LRN_RO(L, L)
LRN_RO(E, E)
LRN_RO(context, context)
LRN_RO(row_cap, row_cap)
LRN_RO(maxd, maxd)

static PyGetSetDef lrn_getset[] = {
    {"window", (getter)get_window, (setter)set_window, "passes the frequencies average over; rows halve at 2 x window", NULL},
    {"confidence", (getter)get_dbl, (setter)set_dbl, "the least probability a prediction returns",
     (void *)offsetof(Learned, confidence)},
    {"rate", (getter)get_dbl, (setter)set_dbl, "the logistic model's learning rate", (void *)offsetof(Learned, rate)},
    {"theta", (getter)get_theta, (setter)set_theta, "the logistic model's weights (a copy)", NULL},
    {"L", (getter)get_L, NULL, "layers", NULL},
    {"E", (getter)get_E, NULL, "experts per layer", NULL},
    {"context", (getter)get_context, NULL, "context layers a prediction reads", NULL},
    {"row_cap", (getter)get_row_cap, NULL, "targets a row keeps when cut back", NULL},
    {"maxd", (getter)get_maxd, NULL, "the farthest distance the rows keep", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef lrn_methods[] = {
    {"observe", (PyCFunction)(void (*)(void))py_observe, METH_VARARGS | METH_KEYWORDS,
     "observe(layer, step, experts, weights=None, predictions=None): layer's dispatch of step "
     "selected experts (distinct ids; their router weights; the caller's speculative "
     "predictions for later layers)"},
    {"predict", (PyCFunction)py_predict, METH_VARARGS,
     "predict(layer, step, d, top=None): experts predicted for layer + d, most probable "
     "first (the first top of them)"},
    {"dump", (PyCFunction)py_dump, METH_NOARGS, "the whole state, as Learned.dump() gives it"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject LearnedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mpl.runtime._engine.Learned",
    .tp_basicsize = sizeof(Learned),
    .tp_dealloc = (destructor)lrn_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_methods = lrn_methods,
    .tp_getset = lrn_getset,
    .tp_doc = "Learned(num_layers, num_experts, context, window, confidence, depth, row_cap=16): "
              "mpl.runtime.prefetch.Learned in C (the same predictions and state).",
    .tp_new = lrn_new,
};

int learned_init_module(PyObject *m) {
    if (PyType_Ready(&LearnedType) < 0) return -1;
    Py_INCREF(&LearnedType);
    if (PyModule_AddObject(m, "Learned", (PyObject *)&LearnedType) < 0) { Py_DECREF(&LearnedType); return -1; }
    return PyModule_AddIntConstant(m, "LEARNED_MAX_KEYS", LRN_MAX_KEYS);
}
