/* Packing trace dispatches into the arrays a replay reads (mpl/runtime/packing.py), and the
 * step and token counts of a pack: the compiled halves of packing.pack_dispatches and
 * packing.steps_and_tokens_of. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <structmember.h>

#include "buffers.h"

/* ---------------------------------------------------------------- steps and tokens */
typedef struct { long long step; int tokens; } StepTok;

static int steptok_cmp(const void *a, const void *b) {
    long long x = ((const StepTok *)a)->step, y = ((const StepTok *)b)->step;
    return (x > y) - (x < y);
}

/* steps_tokens(steps, tokens): mpl.trace.steps_and_tokens over a pack's arrays (int64 steps,
 * -1 for None; int32 tokens per record): (distinct steps, the sum over steps of their widest
 * record). Steps in order (a recorded or synthetic trace) are one pass; any other order is
 * sorted first. */
static PyObject *pack_steps_tokens(PyObject *self, PyObject *args) {
    PyObject *so, *to;
    if (!PyArg_ParseTuple(args, "OO", &so, &to)) return NULL;
    Buf sb, tb;
    if (get_req_buf(so, &sb, 8, 0, "steps") < 0) { rel_buf(&sb); return NULL; }
    Py_ssize_t n = sb.b.len / 8;
    if (get_req_buf(to, &tb, 4, n, "tokens") < 0) { rel_buf(&sb); rel_buf(&tb); return NULL; }
    const long long *st = sb.b.buf;
    const int *tk = tb.b.buf;
    long long distinct = 0, total = 0;
    int sorted = 1;
    for (Py_ssize_t i = 1; i < n; i++)
        if (st[i] < st[i - 1]) { sorted = 0; break; }
    StepTok *v = NULL;
    if (!sorted) {
        if ((size_t)n > SIZE_MAX / sizeof(StepTok)) { rel_buf(&sb); rel_buf(&tb); return PyErr_NoMemory(); }
        v = malloc(sizeof(StepTok) * (size_t)(n ? n : 1));
        if (!v) { rel_buf(&sb); rel_buf(&tb); return PyErr_NoMemory(); }
        for (Py_ssize_t i = 0; i < n; i++) { v[i].step = st[i]; v[i].tokens = tk[i]; }
        qsort(v, (size_t)n, sizeof(StepTok), steptok_cmp);
    }
    for (Py_ssize_t i = 0; i < n;) {
        long long s = v ? v[i].step : st[i];
        int w = 0;
        for (; i < n && (v ? v[i].step : st[i]) == s; i++) {
            int t = v ? v[i].tokens : tk[i];
            if (t > w) w = t;
        }
        distinct++;
        total += w;
    }
    free(v);
    rel_buf(&sb); rel_buf(&tb);
    return Py_BuildValue("(LL)", distinct, total);
}

/* ---------------------------------------------------------------- packing dispatches */
/* pack_dispatches(dispatches, num_experts): fast.pack_dispatches in C for the common
 * shapes (each dispatch's layer and step exact ints, its experts a list of lists of exact
 * ints, its weights None or lists of exact floats of the same shape); None for anything
 * else (the Python packer takes it, with its errors). Returns (layers, offs, experts,
 * weights or None, steps, tokens, multi, weights_mixed): the arrays as bytes, multi a list
 * of (record index, {expert: tokens}). The same distinct experts (first occurrence, router
 * order), the same mean weights (summed in order, then divided) as mpl.runtime.routing
 * (a sum that overflows is left to it). */
static PyObject *s_layer_a, *s_step_a, *s_experts_a, *s_weights_a, *s_predictions_a;

/* an exact int in [lo, hi) into *out; 0: not one (the Python packer decides) */
static int exact_int(PyObject *v, long lo, long hi, long *out) {
    if (!PyLong_CheckExact(v)) return 0;
    int of = 0;
    long x = PyLong_AsLongAndOverflow(v, &of);
    if (of || x < lo || x >= hi) { PyErr_Clear(); return 0; }
    *out = x;
    return 1;
}

/* the offset of a slot member ``name`` of type t (an object slot), -1 when it is not one */
static Py_ssize_t slot_offset(PyTypeObject *t, PyObject *name) {
    PyObject *desc = _PyType_Lookup(t, name);      /* borrowed */
    if (!desc || Py_TYPE(desc) != &PyMemberDescr_Type) return -1;
    PyMemberDef *m = ((PyMemberDescrObject *)desc)->d_member;
    return m->type == T_OBJECT_EX && !(m->flags & READONLY) ? m->offset : -1;
}

/* d.<name> as a new reference: read at its slot when d is of the type the offsets are for */
static inline PyObject *dispatch_field(PyObject *d, PyTypeObject *t, Py_ssize_t off, PyObject *name) {
    if (Py_TYPE(d) == t && off >= 0) {
        PyObject *v = *(PyObject **)((char *)d + off);
        Py_XINCREF(v);
        if (!v) PyErr_SetObject(PyExc_AttributeError, name);
        return v;
    }
    return PyObject_GetAttr(d, name);
}

static PyObject *pack_dispatches(PyObject *self, PyObject *args) {
    PyObject *seq_o;
    long E;
    if (!PyArg_ParseTuple(args, "Ol", &seq_o, &E)) return NULL;
    if (E < 1 || E > INT_MAX) { PyErr_SetString(PyExc_ValueError, "pack_dispatches: num_experts out of range"); return NULL; }
    /* a tuple: the sequence cannot change under the loop; the objects are held by it */
    PyObject *seq = PySequence_Tuple(seq_o);
    if (!seq) return NULL;
    GrowBuf bl = {0}, bo = {0}, be = {0}, bw = {0}, bs = {0}, bt = {0}, bh = {0};
    PyObject *multi = PyList_New(0), *result = NULL;
    int *seen = calloc((size_t)E, sizeof(int));     /* expert -> 1 + its index in the dispatch, this round */
    int *rowbuf = NULL;
    double *wsum = NULL;
    long *wcnt = NULL;
    Py_ssize_t rcap = 0;
    long long with_w = 0, without_w = 0;
    int bad_range = 0, ok = 1;
    if (!multi || !seen) { PyErr_NoMemory(); goto done; }
    int zero = 0;
    if (gb_put(&bo, &zero, 4) < 0) goto done;
    long long off = 0;
    Py_ssize_t nd = PyTuple_GET_SIZE(seq);
    if (nd > INT_MAX) { ok = 0; goto fallback; }
    /* the type of the first dispatch (mpl.trace.Dispatch: a slots dataclass) and its
     * fields' slots, read directly for every dispatch of that type */
    PyTypeObject *dt = nd ? Py_TYPE(PyTuple_GET_ITEM(seq, 0)) : NULL;
    Py_ssize_t o_layer = -1, o_step = -1, o_exp = -1, o_w = -1, o_p = -1;
    if (dt) {
        o_layer = slot_offset(dt, s_layer_a); o_step = slot_offset(dt, s_step_a);
        o_exp = slot_offset(dt, s_experts_a); o_w = slot_offset(dt, s_weights_a);
        o_p = slot_offset(dt, s_predictions_a);
    }
    for (Py_ssize_t r = 0; r < nd && ok; r++) {
        PyObject *d = PyTuple_GET_ITEM(seq, r);
        PyObject *lo = dispatch_field(d, dt, o_layer, s_layer_a);
        PyObject *so = lo ? dispatch_field(d, dt, o_step, s_step_a) : NULL;
        PyObject *xo = so ? dispatch_field(d, dt, o_exp, s_experts_a) : NULL;
        PyObject *wo = xo ? dispatch_field(d, dt, o_w, s_weights_a) : NULL;
        if (!wo) { Py_XDECREF(lo); Py_XDECREF(so); Py_XDECREF(xo); PyErr_Clear(); ok = 0; break; }
        {   /* predictions go with the Python packer */
            PyObject *po = dispatch_field(d, dt, o_p, s_predictions_a);
            int has_p = !po || (po != Py_None && PyObject_IsTrue(po) != 0);
            if (!po) PyErr_Clear();
            Py_XDECREF(po);
            if (has_p) { Py_DECREF(lo); Py_DECREF(so); Py_DECREF(xo); Py_DECREF(wo); PyErr_Clear(); ok = 0; break; }
        }
        long layer = 0;
        int good = exact_int(lo, 0, INT_MAX, &layer) && PyLong_CheckExact(so) && PyList_CheckExact(xo) &&
                   (wo == Py_None || PyList_CheckExact(wo));
        long long step = 0;
        if (good) {
            int of = 0;
            step = PyLong_AsLongLongAndOverflow(so, &of);
            if (of) { PyErr_Clear(); good = 0; }
        }
        Py_ssize_t tokens = good ? PyList_GET_SIZE(xo) : 0;
        if (good && wo != Py_None && PyList_GET_SIZE(wo) != tokens) good = 0;
        /* tokens_of of a several-token dispatch; made before the rows are measured: from
         * here to the next dispatch nothing allocates a collectable object, so no finalizer
         * can change the lists this reads */
        PyObject *tok = NULL;
        if (good && tokens > 1 && !(tok = PyDict_New())) {
            Py_DECREF(lo); Py_DECREF(so); Py_DECREF(xo); Py_DECREF(wo);
            goto done;
        }
        /* the rows (held by the lists, which nothing changes while this loop runs: no Python
         * code runs after the attribute reads) */
        Py_ssize_t total = 0;
        for (Py_ssize_t t = 0; good && t < tokens; t++) {
            PyObject *row = PyList_GET_ITEM(xo, t);
            if (!PyList_CheckExact(row)) { good = 0; break; }
            if (wo != Py_None) {
                PyObject *wr = PyList_GET_ITEM(wo, t);
                if (!PyList_CheckExact(wr) || PyList_GET_SIZE(wr) != PyList_GET_SIZE(row)) { good = 0; break; }
            }
            total += PyList_GET_SIZE(row);
        }
        if (good && total > rcap) {
            Py_ssize_t nc = total > 64 ? total : 64;
            int *nr = realloc(rowbuf, sizeof(int) * nc);
            double *nw = nr ? realloc(wsum, sizeof(double) * nc) : NULL;
            long *nn = nw ? realloc(wcnt, sizeof(long) * nc) : NULL;
            if (nr) rowbuf = nr;
            if (nw) wsum = nw;
            if (!nn) { Py_DECREF(lo); Py_DECREF(so); Py_DECREF(xo); Py_DECREF(wo); Py_XDECREF(tok); PyErr_NoMemory(); goto done; }
            wcnt = nn;
            rcap = nc;
        }
        Py_ssize_t n = 0;
        for (Py_ssize_t t = 0; good && t < tokens; t++) {
            PyObject *row = PyList_GET_ITEM(xo, t), *wr = wo != Py_None ? PyList_GET_ITEM(wo, t) : NULL;
            Py_ssize_t m = PyList_GET_SIZE(row);
            for (Py_ssize_t j = 0; j < m; j++) {
                PyObject *eo = PyList_GET_ITEM(row, j);
                long e;
                if (!PyLong_CheckExact(eo)) { good = 0; break; }
                int of = 0;
                e = PyLong_AsLongAndOverflow(eo, &of);
                if (of) { PyErr_Clear(); good = 0; break; }
                double w = 0.0;
                if (wr) {
                    PyObject *x = PyList_GET_ITEM(wr, j);
                    if (!PyFloat_CheckExact(x)) { good = 0; break; }
                    w = PyFloat_AS_DOUBLE(x);
                }
                if (e < 0 || e >= E) { bad_range = 1; good = 0; break; }
                int at = seen[e];
                if (!at) {
                    seen[e] = (int)(n + 1);
                    rowbuf[n] = (int)e; wsum[n] = w; wcnt[n] = 1;
                    n++;
                } else { wsum[at - 1] += w; wcnt[at - 1]++; }
            }
            if (good && tok) {   /* tokens_of: per expert, the tokens that chose it (set(row)) */
                for (Py_ssize_t j = 0; j < m; j++) {
                    PyObject *eo = PyList_GET_ITEM(row, j);
                    int dup = 0;
                    for (Py_ssize_t q = 0; q < j; q++)
                        if (PyLong_AsLong(PyList_GET_ITEM(row, q)) == PyLong_AsLong(eo)) { dup = 1; break; }
                    if (dup) continue;
                    PyObject *c = PyDict_GetItemWithError(tok, eo);
                    long cv = c ? PyLong_AsLong(c) + 1 : 1;
                    if (!c && PyErr_Occurred()) { good = 0; ok = -1; break; }
                    PyObject *cn = PyLong_FromLong(cv);
                    if (!cn || PyDict_SetItem(tok, eo, cn) < 0) { Py_XDECREF(cn); good = 0; ok = -1; break; }
                    Py_DECREF(cn);
                }
            }
        }
        for (Py_ssize_t j = 0; j < n; j++) seen[rowbuf[j]] = 0;
        int has_w = wo != Py_None;
        signed char hflag = (signed char)has_w;
        Py_DECREF(lo); Py_DECREF(so); Py_DECREF(xo); Py_DECREF(wo);
        if (ok < 0) { Py_XDECREF(tok); goto done; }
        for (Py_ssize_t j = 0; good && has_w && j < n; j++)
            if (!isfinite(wsum[j])) good = 0;     /* a sum that overflowed: routing.distinct's mean */
        if (!good) { Py_XDECREF(tok); ok = 0; break; }
        int iv = (int)layer, nt = tokens == 1 ? 1 : (int)tokens;
        if (tokens != 1 && tokens > INT_MAX) { Py_XDECREF(tok); ok = 0; break; }
        off += n;
        if (off > INT_MAX) { Py_XDECREF(tok); ok = 0; break; }
        int offv = (int)off;
        if (gb_put(&bl, &iv, 4) < 0 || gb_put(&bo, &offv, 4) < 0 || gb_put(&bs, &step, 8) < 0 ||
                gb_put(&bt, &nt, 4) < 0) { Py_XDECREF(tok); goto done; }
        if (gb_put(&be, rowbuf, (Py_ssize_t)sizeof(int) * n) < 0 || gb_put(&bh, &hflag, 1) < 0) { Py_XDECREF(tok); goto done; }
        if (has_w) {
            with_w++;
            for (Py_ssize_t j = 0; j < n; j++) {
                double mw = wcnt[j] == 1 ? wsum[j] : wsum[j] / (double)wcnt[j];
                if (gb_put(&bw, &mw, 8) < 0) { Py_XDECREF(tok); goto done; }
            }
        } else without_w++;
        if (tok) {
            PyObject *pair = Py_BuildValue("(nN)", r, tok);
            if (!pair || PyList_Append(multi, pair) < 0) { Py_XDECREF(pair); goto done; }
            Py_DECREF(pair);
        }
    }
fallback:
    if (bad_range) {
        PyErr_SetString(PyExc_ValueError, "an expert id out of range in the records");
        goto done;
    }
    if (!ok) { result = Py_None; Py_INCREF(result); goto done; }
    {
        PyObject *w = with_w ? gb_bytes(&bw) : (Py_INCREF(Py_None), Py_None);
        PyObject *h = (with_w && without_w) ? gb_bytes(&bh) : (Py_INCREF(Py_None), Py_None);
        result = Py_BuildValue("(NNNNNNOON)", gb_bytes(&bl), gb_bytes(&bo), gb_bytes(&be), w, gb_bytes(&bs),
                               gb_bytes(&bt), multi, (with_w && without_w) ? Py_True : Py_False, h);
    }
done:
    Py_DECREF(seq);
    Py_XDECREF(multi);
    free(bl.p); free(bo.p); free(be.p); free(bw.p); free(bs.p); free(bt.p); free(bh.p);
    free(seen); free(rowbuf); free(wsum); free(wcnt);
    return result;
}


static PyMethodDef pack_methods[] = {
    {"steps_tokens", pack_steps_tokens, METH_VARARGS,
     "steps_tokens(steps, tokens) -> (distinct steps, tokens): mpl.trace.steps_and_tokens of a pack"},
    {"pack_dispatches", pack_dispatches, METH_VARARGS,
     "pack_dispatches(dispatches, num_experts): the arrays of mpl.runtime.packing.Packed, or None"},
    {NULL, NULL, 0, NULL},
};

int pack_init_module(PyObject *m) {
    if (!(s_layer_a = PyUnicode_InternFromString("layer")) || !(s_step_a = PyUnicode_InternFromString("step")) ||
            !(s_experts_a = PyUnicode_InternFromString("experts")) ||
            !(s_weights_a = PyUnicode_InternFromString("weights")) ||
            !(s_predictions_a = PyUnicode_InternFromString("predictions")))
        return -1;
    return PyModule_AddFunctions(m, pack_methods);
}
