/* The per-layer budget split in C (budget.h): mpl/runtime/budgets.py's allocate,
 * _allocate_equal, _allocate_each, _allocate_sparse and _fix_over, statement for statement.
 *
 * Python's ints become long longs: with n <= 2^22 layers and |budget|, |lo|, |hi| <= 2^30
 * every integer sum is below 2^53 in magnitude, so each int is exactly a double too, and
 * int-float operations (a comparison, rest * w, rest / k) are those of Python (which converts
 * an int below 2^53 exactly, compares ints and floats exactly, and rounds an int / int once).
 * A dict `fixed` becomes a per-layer mark (its values are ints: their sum is exact in any
 * order); an int exact share (a fixed one) is held as the double of the same value, and its
 * floor and fraction (0) are what Python computes for the int. Float sums are sum()'s
 * (pysum.h) or math.fsum's (budget_fsum, CPython's algorithm).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "pysum.h"

/* ------------------------------------------------------------------ math.fsum */
int budget_fsum(const double *xs, long nx, double *out) {
    enum { NUM_PARTIALS = 32 };
    double ps[NUM_PARTIALS], *p = ps;
    long n = 0, m = NUM_PARTIALS;
    double x, y, t, xsave, special_sum = 0.0, inf_sum = 0.0, hi, yr, lo = 0.0;
    int r = BUDGET_OK;
    for (long k = 0; k < nx; k++) {
        x = xs[k];
        xsave = x;
        long i = 0;
        for (long j = 0; j < n; j++) {         /* for y in partials */
            y = p[j];
            if (fabs(x) < fabs(y)) { t = x; x = y; y = t; }
            hi = x + y;
            yr = hi - x;
            lo = y - yr;
            if (lo != 0.0) p[i++] = lo;
            x = hi;
        }
        n = i;                                 /* ps[i:] = [x] */
        if (x != 0.0) {
            if (!isfinite(x)) {
                /* a nonfinite x: an intermediate overflow, or a nan or inf in the summands */
                if (isfinite(xsave)) { r = BUDGET_FSUM_OVERFLOW; goto done; }
                if (isinf(xsave)) inf_sum += xsave;
                special_sum += xsave;
                n = 0;                         /* reset partials */
            } else {
                if (n >= m) {
                    double *np = malloc(sizeof(double) * (size_t)m * 2);
                    if (!np) { r = BUDGET_NOMEM; goto done; }
                    memcpy(np, p, sizeof(double) * (size_t)n);
                    if (p != ps) free(p);
                    p = np;
                    m *= 2;
                }
                p[n++] = x;
            }
        }
    }
    if (special_sum != 0.0) {
        if (isnan(inf_sum)) r = BUDGET_FSUM_INF_NAN;
        else *out = special_sum;
        goto done;
    }
    hi = 0.0;
    if (n > 0) {
        hi = p[--n];
        /* sum_exact(ps, hi) from the top, stop when the sum becomes inexact */
        while (n > 0) {
            x = hi;
            y = p[--n];
            hi = x + y;
            yr = hi - x;
            lo = y - yr;
            if (lo != 0.0) break;
        }
        /* half-even rounding across multiple partials */
        if (n > 0 && ((lo < 0.0 && p[n - 1] < 0.0) || (lo > 0.0 && p[n - 1] > 0.0))) {
            y = lo * 2.0;
            x = hi + y;
            yr = x - hi;
            if (y == yr) hi = x;
        }
    }
    *out = hi;
done:
    if (p != ps) free(p);
    return r;
}

/* ------------------------------------------------------------------ helpers */
/* min(hi, max(lo, int(math.floor(x)))) of a finite x (as a double holding the int) */
static inline double clamp_floor(double x, long long lo, long long hi) {
    double f = floor(x), l = (double)lo, h = (double)hi;
    double m = f > l ? f : l;              /* max(lo, f): lo unless f > lo */
    return m < h ? m : h;                  /* min(hi, m): hi unless m < hi */
}

/* int(math.floor(x)) fails on a NaN or an infinity as Python's does */
static inline int floor_ok(double x) {
    if (isnan(x)) return BUDGET_NAN_SHARE;
    if (isinf(x)) return BUDGET_INF_SHARE;
    return BUDGET_OK;
}

/* _fix_over(excess, deficit); each "falsy" when has_* is 0 (an empty list) or the sum is 0 */
static inline int fix_over(int has_ex, double excess, int has_def, double deficit) {
    if (!has_ex || !(excess != 0.0)) return 0;          /* not excess */
    if (!has_def || !(deficit != 0.0)) return 1;        /* not deficit */
    return excess >= deficit;
}

typedef struct { double key; long i; } FracIdx;   /* sort by (-frac, i) */

static int frac_cmp(const void *a, const void *b) {
    const FracIdx *x = a, *y = b;
    if (x->key > y->key) return -1;        /* larger fraction first */
    if (x->key < y->key) return 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* ------------------------------------------------------------------ _allocate_equal */
static int allocate_equal(double v, long n, long long budget, long long lo, long long hi, long long *out) {
    PySum s;                               /* sum(repeat(v, n)) */
    pysum_init(&s);
    for (long i = 0; i < n; i++) pysum_add(&s, v);
    double tw = pysum_value(&s);
    double share = (double)budget * v / tw;
    if (share > (double)hi || share < (double)lo) {
        long long b = share > (double)hi ? hi : lo;
        long long c = b > lo ? b : lo;
        c = c < hi ? c : hi;
        for (long i = 0; i < n; i++) out[i] = c;
        return BUDGET_OK;
    }
    int r = floor_ok(share);
    if (r) return r;
    long long c = (long long)clamp_floor(share, lo, hi);
    long long left = budget - (long long)n * c;
    if (left <= 0 || c >= hi) {
        for (long i = 0; i < n; i++) out[i] = c;
        return BUDGET_OK;
    }
    long long m = left < n ? left : n;     /* one each, lowest layers first */
    for (long i = 0; i < n; i++) out[i] = i < m ? c + 1 : c;
    return BUDGET_OK;
}

/* ------------------------------------------------------------------ _allocate_each */
enum { FREE = 0, AT_LO = 1, AT_HI = 2 };

static int allocate_each(const double *w0, long n, long long budget, long long lo, long long hi,
                         long long *caps) {
    double *w = malloc(sizeof(double) * (size_t)n), *share = malloc(sizeof(double) * (size_t)n);
    double *tmp = malloc(sizeof(double) * (size_t)n), *exact = malloc(sizeof(double) * (size_t)n);
    char *fixed = calloc((size_t)n, 1);
    FracIdx *order = malloc(sizeof(FracIdx) * (size_t)n);
    long *over = malloc(sizeof(long) * (size_t)n), *under = malloc(sizeof(long) * (size_t)n);
    int r = BUDGET_NOMEM;
    if (!w || !share || !tmp || !exact || !fixed || !order || !over || !under) goto done;
    memcpy(w, w0, sizeof(double) * (size_t)n);
    PySum s;
    pysum_init(&s);
    for (long i = 0; i < n; i++) pysum_add(&s, w[i]);
    if (pysum_value(&s) <= 0) for (long i = 0; i < n; i++) w[i] = 1.0;
    long long fixed_sum = 0;               /* sum(fixed.values()) */
    for (;;) {
        long long rest = budget - fixed_sum;
        long nfree = 0;
        pysum_init(&s);                    /* tw = sum(w[i] for i in free) */
        for (long i = 0; i < n; i++)
            if (fixed[i] == FREE) { pysum_add(&s, w[i]); nfree++; }
        double tw = pysum_value(&s);
        long no = 0, nu = 0;
        for (long i = 0; i < n; i++) {
            if (fixed[i] != FREE) continue;
            share[i] = tw > 0 ? (double)rest * w[i] / tw : (double)rest / (double)(nfree > 1 ? nfree : 1);
        }
        for (long i = 0; i < n; i++) if (fixed[i] == FREE && share[i] > (double)hi) over[no++] = i;
        for (long i = 0; i < n; i++) if (fixed[i] == FREE && share[i] < (double)lo) under[nu++] = i;
        if (!no && !nu) break;
        double excess = 0.0, deficit = 0.0;
        if (no) {
            for (long j = 0; j < no; j++) tmp[j] = share[over[j]] - (double)hi;
            if ((r = budget_fsum(tmp, no, &excess)) != BUDGET_OK) goto done;
        }
        if (nu) {
            for (long j = 0; j < nu; j++) tmp[j] = (double)lo - share[under[j]];
            if ((r = budget_fsum(tmp, nu, &deficit)) != BUDGET_OK) goto done;
        }
        if (fix_over(no > 0, excess, nu > 0, deficit))
            for (long j = 0; j < no; j++) { fixed[over[j]] = AT_HI; fixed_sum += hi; }
        else
            for (long j = 0; j < nu; j++) { fixed[under[j]] = AT_LO; fixed_sum += lo; }
    }
    long long total = 0;
    for (long i = 0; i < n; i++) {
        exact[i] = fixed[i] == AT_HI ? (double)hi : fixed[i] == AT_LO ? (double)lo : share[i];
        if ((r = floor_ok(exact[i])) != BUDGET_OK) goto done;
        caps[i] = (long long)clamp_floor(exact[i], lo, hi);
        total += caps[i];
    }
    long long left = budget - total;
    for (long i = 0; i < n; i++) { order[i].key = exact[i] - floor(exact[i]); order[i].i = i; }
    qsort(order, (size_t)n, sizeof(FracIdx), frac_cmp);
    for (long j = 0; j < n; j++) {
        if (left <= 0) break;
        long i = order[j].i;
        if (caps[i] < hi && fixed[i] == FREE) { caps[i]++; left--; }
    }
    r = BUDGET_OK;
done:
    free(w); free(share); free(tmp); free(exact); free(fixed); free(order); free(over); free(under);
    return r;
}

/* ------------------------------------------------------------------ _allocate_sparse */
static int allocate_sparse(const double *w, long n, const long *nz, long nnz, long long budget,
                           long long lo, long long hi, long long *caps) {
    long zcount = n - nnz;
    double *share = malloc(sizeof(double) * (size_t)nnz), *tmp = malloc(sizeof(double) * ((size_t)nnz + 1));
    double *exact = malloc(sizeof(double) * (size_t)nnz), *frac = malloc(sizeof(double) * (size_t)nnz);
    char *fixed = calloc((size_t)nnz, 1), *isnz = calloc((size_t)n, 1);
    long *over = malloc(sizeof(long) * (size_t)nnz), *under = malloc(sizeof(long) * (size_t)nnz);
    FracIdx *cand = malloc(sizeof(FracIdx) * (size_t)nnz);
    long *tied = malloc(sizeof(long) * (size_t)nnz);
    int r = BUDGET_NOMEM;
    if (!share || !tmp || !exact || !frac || !fixed || !isnz || !over || !under || !cand || !tied) goto done;
    for (long j = 0; j < nnz; j++) isnz[nz[j]] = 1;
    long long fixed_sum = 0;               /* sum(fixed.values()) over the nonzero layers */
    int zfixed = FREE;                     /* the zero block's bound once fixed */
    double zshare = 0.0;
    for (;;) {
        long nf = 0;
        PySum s;
        pysum_init(&s);
        for (long j = 0; j < nnz; j++) if (fixed[j] == FREE) { pysum_add(&s, w[nz[j]]); nf++; }
        long long nfree = nf + (zfixed == FREE ? zcount : 0);
        long long zval = zfixed == AT_HI ? hi : lo;
        long long rest = budget - (fixed_sum + (zfixed != FREE ? zcount * zval : 0));
        double tw = pysum_value(&s);
        if (tw > 0) {
            for (long j = 0; j < nnz; j++) if (fixed[j] == FREE) share[j] = (double)rest * w[nz[j]] / tw;
            zshare = (double)rest * 0.0 / tw;
        } else {
            double k = (double)(nfree > 1 ? nfree : 1);
            for (long j = 0; j < nnz; j++) if (fixed[j] == FREE) share[j] = (double)rest / k;
            zshare = (double)rest / k;
        }
        int zfree = zfixed == FREE;
        long no = 0, nu = 0;
        for (long j = 0; j < nnz; j++) if (fixed[j] == FREE && share[j] > (double)hi) over[no++] = j;
        int zover = zfree && zshare > (double)hi;
        for (long j = 0; j < nnz; j++) if (fixed[j] == FREE && share[j] < (double)lo) under[nu++] = j;
        int zunder = zfree && zshare < (double)lo;
        if (!(no || zover || nu || zunder)) break;
        double excess = 0.0, deficit = 0.0;
        if (no || zover) {
            long q = 0;
            for (long j = 0; j < no; j++) tmp[q++] = share[over[j]] - (double)hi;
            if (zover) tmp[q++] = (zshare - (double)hi) * (double)zcount;
            if ((r = budget_fsum(tmp, q, &excess)) != BUDGET_OK) goto done;
        }
        if (nu || zunder) {
            long q = 0;
            for (long j = 0; j < nu; j++) tmp[q++] = (double)lo - share[under[j]];
            if (zunder) tmp[q++] = (double)(lo * zcount);
            if ((r = budget_fsum(tmp, q, &deficit)) != BUDGET_OK) goto done;
        }
        if (fix_over(no || zover, excess, nu || zunder, deficit)) {
            for (long j = 0; j < no; j++) { fixed[over[j]] = AT_HI; fixed_sum += hi; }
            if (zover) zfixed = AT_HI;
        } else {
            for (long j = 0; j < nu; j++) { fixed[under[j]] = AT_LO; fixed_sum += lo; }
            if (zunder) zfixed = AT_LO;
        }
    }
    double zexact = zfixed == AT_HI ? (double)hi : zfixed == AT_LO ? (double)lo : zshare;
    if ((r = floor_ok(zexact)) != BUDGET_OK) goto done;
    long long zcap = (long long)clamp_floor(zexact, lo, hi);
    for (long i = 0; i < n; i++) caps[i] = zcap;
    long long total = 0;
    for (long j = 0; j < nnz; j++) {
        exact[j] = fixed[j] == AT_HI ? (double)hi : fixed[j] == AT_LO ? (double)lo : share[j];
        if ((r = floor_ok(exact[j])) != BUDGET_OK) goto done;
        caps[nz[j]] = (long long)clamp_floor(exact[j], lo, hi);
        total += caps[nz[j]];
    }
    long long left = budget - (total + zcount * zcap);
    r = BUDGET_OK;
    if (left <= 0) goto done;
    /* the remainders, largest fraction first, ties to the lower layer: the nonzero layers
     * one by one; the zero block, all of one fraction, in layer order */
    long nc = 0;
    for (long j = 0; j < nnz; j++) {
        frac[j] = exact[j] - floor(exact[j]);
        if (caps[nz[j]] < hi && fixed[j] == FREE) { cand[nc].key = frac[j]; cand[nc].i = j; nc++; }
    }
    qsort(cand, (size_t)nc, sizeof(FracIdx), frac_cmp);   /* (j order is layer order) */
    double zf = zexact - floor(zexact);
    int zcand = zfixed == FREE && zcap < hi;
    long k = 0;
    while (k < nc && left > 0 && (!zcand || frac[cand[k].i] > zf)) {
        caps[nz[cand[k].i]]++;
        left--;
        k++;
    }
    if (zcand && left > 0) {               /* the zero block's fraction, then the ones below it */
        long nt = 0;
        while (k < nc && frac[cand[k].i] == zf) tied[nt++] = nz[cand[k++].i];
        long t = 0;
        for (long i = 0; i < n; i++) {     /* layer order through the tie */
            if (left <= 0) break;
            if (isnz[i]) {
                if (t < nt && tied[t] == i) { caps[i]++; left--; t++; }
                continue;
            }
            caps[i]++;
            left--;
        }
        while (k < nc && left > 0) {
            caps[nz[cand[k].i]]++;
            left--;
            k++;
        }
    }
done:
    free(share); free(tmp); free(exact); free(frac); free(fixed); free(isnz); free(over); free(under);
    free(cand); free(tied);
    return r;
}

/* ------------------------------------------------------------------ allocate */
static int in_range(long n, long long budget, long long lo, long long hi) {
    return n >= 0 && n <= BUDGET_LAYERS_MAX && budget >= -BUDGET_VALUE_MAX && budget <= BUDGET_VALUE_MAX &&
           lo >= -BUDGET_VALUE_MAX && lo <= BUDGET_VALUE_MAX && hi >= -BUDGET_VALUE_MAX && hi <= BUDGET_VALUE_MAX;
}

int budget_allocate(const double *w_in, long n, long long budget, long long lo, long long hi,
                    long long *out) {
    if (!in_range(n, budget, lo, hi)) return BUDGET_RANGE;
    if (n == 0) return BUDGET_OK;
    if (lo * (long long)n > budget) return BUDGET_BELOW_MIN;
    double *w = malloc(sizeof(double) * (size_t)n);
    long *nz = malloc(sizeof(long) * (size_t)n);
    int r = BUDGET_NOMEM;
    if (!w || !nz) goto done;
    long nnz = 0, same = 1;
    for (long i = 0; i < n; i++) {
        double x = w_in[i];
        w[i] = x > 0.0 ? x : 0.0;          /* max(0.0, float(x)): 0.0 unless x > 0.0 */
        if (w[i] > 0) nz[nnz++] = i;
        if (w[i] != w[0]) same = 0;        /* w.count(w[0]) == n */
    }
    if (!nnz || (nnz == n && same)) r = allocate_equal(nnz ? w[0] : 1.0, n, budget, lo, hi, out);
    else if (2 * nnz > n) r = allocate_each(w, n, budget, lo, hi, out);
    else r = allocate_sparse(w, n, nz, nnz, budget, lo, hi, out);
done:
    free(w);
    free(nz);
    return r;
}

/* ------------------------------------------------------------------ errors */
int budget_set_error(int code, long long budget, long n, long long lo) {
    switch (code) {
    case BUDGET_BELOW_MIN: {
        PyObject *msg = PyUnicode_FromFormat(
            "per_layer.total_budget = %lld is below layers x min_capacity = %ld x %lld: lower "
            "min_capacity or raise total_budget", budget, n, lo);
        if (!msg) return -1;
        PyObject *cls = NULL, *mod = PyImport_ImportModule("mpl.runtime.budgets");
        if (mod) {
            cls = PyObject_GetAttrString(mod, "BudgetError");
            Py_DECREF(mod);
        }
        if (!cls || !PyExceptionClass_Check(cls)) {
            Py_XDECREF(cls);
            PyErr_Clear();
            cls = Py_NewRef(PyExc_ValueError);
        }
        PyErr_SetObject(cls, msg);
        Py_DECREF(cls);
        Py_DECREF(msg);
        return -1;
    }
    case BUDGET_NOMEM:
        PyErr_NoMemory();
        return -1;
    case BUDGET_RANGE:
        PyErr_Format(PyExc_ValueError, "budget split: more than %ld layers, or a budget or bound beyond "
                     "+-%lld (what the compiled split holds exactly)", BUDGET_LAYERS_MAX, BUDGET_VALUE_MAX);
        return -1;
    case BUDGET_NAN_SHARE:
        PyErr_SetString(PyExc_ValueError, "cannot convert float NaN to integer");
        return -1;
    case BUDGET_INF_SHARE:
        PyErr_SetString(PyExc_OverflowError, "cannot convert float infinity to integer");
        return -1;
    case BUDGET_FSUM_OVERFLOW:
        PyErr_SetString(PyExc_OverflowError, "intermediate overflow in fsum");
        return -1;
    case BUDGET_FSUM_INF_NAN:
        PyErr_SetString(PyExc_ValueError, "-inf + inf in fsum");
        return -1;
    default:
        PyErr_Format(PyExc_SystemError, "budget split: unknown code %d", code);
        return -1;
    }
}

/* ------------------------------------------------------------------ the test entry points */
static int as_ll(PyObject *x, const char *what, long long *out, int *range) {
    if (!PyLong_Check(x)) {
        PyErr_Format(PyExc_TypeError, "_allocate: %s must be an int, not %.80s", what, Py_TYPE(x)->tp_name);
        return -1;
    }
    int of = 0;
    long long v = PyLong_AsLongLongAndOverflow(x, &of);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (of) *range = 1;
    *out = v;
    return 0;
}

/* _allocate(weights, budget, lo, hi): budgets.allocate through budget_allocate (TEST ONLY) */
static PyObject *py_allocate(PyObject *self, PyObject *args) {
    PyObject *wo, *bo, *lo_o, *hi_o;
    if (!PyArg_ParseTuple(args, "OOOO:_allocate", &wo, &bo, &lo_o, &hi_o)) return NULL;
    long long budget, lo, hi;
    int range = 0;
    if (as_ll(bo, "budget", &budget, &range) < 0 || as_ll(lo_o, "lo", &lo, &range) < 0 ||
            as_ll(hi_o, "hi", &hi, &range) < 0)
        return NULL;
    PyObject *seq = PySequence_Fast(wo, "_allocate: weights must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (range || !in_range(n > BUDGET_LAYERS_MAX ? BUDGET_LAYERS_MAX + 1L : (long)n, budget, lo, hi)) {
        Py_DECREF(seq);
        budget_set_error(BUDGET_RANGE, 0, 0, 0);
        return NULL;
    }
    if (n && lo * (long long)n > budget) {     /* Python checks before reading the weights */
        Py_DECREF(seq);
        budget_set_error(BUDGET_BELOW_MIN, budget, (long)n, lo);
        return NULL;
    }
    double *w = malloc(sizeof(double) * ((size_t)n + 1));
    long long *caps = malloc(sizeof(long long) * ((size_t)n + 1));
    PyObject *out = NULL;
    if (!w || !caps) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t i = 0; i < n; i++) {       /* float(x) */
        w[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, i));
        if (w[i] == -1.0 && PyErr_Occurred()) goto done;
    }
    int r = budget_allocate(w, (long)n, budget, lo, hi, caps);
    if (r != BUDGET_OK) { budget_set_error(r, budget, (long)n, lo); goto done; }
    if (!(out = PyList_New(n))) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyLong_FromLongLong(caps[i]);
        if (!x) { Py_CLEAR(out); goto done; }
        PyList_SET_ITEM(out, i, x);
    }
done:
    free(w);
    free(caps);
    Py_DECREF(seq);
    return out;
}

/* _fsum(values): math.fsum through budget_fsum (TEST ONLY) */
static PyObject *py_fsum(PyObject *self, PyObject *values) {
    PyObject *seq = PySequence_Fast(values, "_fsum: a sequence");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    double *x = malloc(sizeof(double) * ((size_t)n + 1)), s = 0.0;
    PyObject *out = NULL;
    if (!x) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t i = 0; i < n; i++) {
        x[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, i));
        if (x[i] == -1.0 && PyErr_Occurred()) goto done;
    }
    int r = budget_fsum(x, (long)n, &s);
    if (r != BUDGET_OK) { budget_set_error(r, 0, 0, 0); goto done; }
    out = PyFloat_FromDouble(s);
done:
    free(x);
    Py_DECREF(seq);
    return out;
}

static PyMethodDef budget_methods[] = {
    {"_allocate", py_allocate, METH_VARARGS,
     "_allocate(weights, budget, lo, hi): TEST ONLY. mpl.runtime.budgets.allocate in C (budget.c)."},
    {"_fsum", py_fsum, METH_O, "_fsum(values): TEST ONLY. math.fsum in C (budget.c)."},
    {NULL, NULL, 0, NULL},
};

int budget_init_module(PyObject *m) {
    return PyModule_AddFunctions(m, budget_methods);
}
