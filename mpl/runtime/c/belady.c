#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buffers.h"

/*
 * Belady's MIN with bypass and in-use protection (mpl/sim/belady.py, the reference): the same
 * algorithm in C, decision by decision. Included by _fast.c (one translation unit).
 *
 * Keys are layer * E + expert. Per access the priority of its next use: next dispatch index
 * * W + the rank of that future among the dispatch's keys (the reference's tie-break), INF
 * when never used again. Residents sit in a binary max-heap on (priority, then the lower key)
 * with lazy invalidation (an entry is stale when the key's resident priority differs), which
 * orders exactly as the reference's heapq of (-priority, key).
 */

typedef struct { long long nu; int k; } BHe;

static inline int bhe_before(BHe a, BHe b) { return a.nu > b.nu || (a.nu == b.nu && a.k < b.k); }

typedef struct { BHe *a; Py_ssize_t n, cap; } BHeap;

static int bh_push(BHeap *h, BHe x) {
    if (h->n == h->cap) {
        Py_ssize_t nc = h->cap ? 2 * h->cap : 64;
        BHe *na = (BHe *)realloc(h->a, (size_t)nc * sizeof(BHe));
        if (!na) { PyErr_NoMemory(); return -1; }
        h->a = na; h->cap = nc;
    }
    Py_ssize_t i = h->n++;
    while (i > 0) {
        Py_ssize_t p = (i - 1) / 2;
        if (!bhe_before(x, h->a[p])) break;
        h->a[i] = h->a[p];
        i = p;
    }
    h->a[i] = x;
    return 0;
}

static void bh_sift_down(BHeap *h, Py_ssize_t i) {
    BHe x = h->a[i];
    Py_ssize_t n = h->n;
    for (;;) {
        Py_ssize_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bhe_before(h->a[c + 1], h->a[c])) c++;
        if (!bhe_before(h->a[c], x)) break;
        h->a[i] = h->a[c];
        i = c;
    }
    h->a[i] = x;
}

static void bh_pop(BHeap *h) {
    if (--h->n > 0) { h->a[0] = h->a[h->n]; bh_sift_down(h, 0); }
}

static void bh_heapify(BHeap *h) {
    for (Py_ssize_t i = h->n / 2 - 1; i >= 0; i--) bh_sift_down(h, i);
}

static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

static const char belady_doc[] =
"belady(offs, layers, experts, num_experts, capacity, pinned, only_layer, outcomes)\n"
"Belady's MIN over the dispatches (offs: int64 offsets into experts, layers: int32 per\n"
"dispatch, experts: int32 distinct per dispatch); only_layer >= 0 keeps that layer's\n"
"dispatches; pinned: an int64 buffer of pinned keys (layer * num_experts + expert) or None;\n"
"outcomes: a writable uint8 buffer per access (of the dispatches kept) or None. Returns\n"
"(accesses, hits, loads, streamed, evictions, per-layer accesses, per-layer hits, layers in\n"
"order of first use). See mpl/sim/belady.py (the caller, and the reference).";

/* the index of key in the sorted uk[0..n), -1 when absent */
static Py_ssize_t key_index(const long long *uk, Py_ssize_t n, long long key) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (uk[mid] < key) lo = mid + 1; else hi = mid;
    }
    return lo < n && uk[lo] == key ? lo : -1;
}

/* keys are numbered densely: directly (layer * E + expert) while the table that takes is
 * small next to the accesses, else in the order of the distinct keys that occur (sorted):
 * memory follows what the dispatches hold, never what num_experts declares */
#define BELADY_DIRECT_KEYS (1L << 20)

static PyObject *belady_belady(PyObject *self, PyObject *args) {
    PyObject *offs_o, *layers_o, *exp_o, *pin_o, *out_o;
    long E, only;
    Py_ssize_t cap;
    if (!PyArg_ParseTuple(args, "OOOlnOlO", &offs_o, &layers_o, &exp_o, &E, &cap, &pin_o, &only, &out_o))
        return NULL;
    Buf bo = {0}, bl = {0}, be = {0}, bp = {0}, bout = {0};
    PyObject *result = NULL;
    long long *last = NULL, *nxt = NULL, *tmp = NULL, *res_nu = NULL, *uk = NULL;
    int *dlist = NULL, *adm = NULL, *admk = NULL, *kid = NULL;
    unsigned char *pin_c = NULL;
    long long *lacc = NULL, *lmiss = NULL;
    int *order = NULL;
    BHeap heap = {0};
    if (E < 1) { PyErr_SetString(PyExc_ValueError, "_fast.belady: num_experts must be >= 1"); return NULL; }
    if (cap < 0) { PyErr_SetString(PyExc_ValueError, "_fast.belady: capacity must be >= 0"); return NULL; }
    if (get_req_buf(offs_o, &bo, 8, 1, "offs") < 0 || get_req_buf(layers_o, &bl, 4, 0, "layers") < 0 ||
        get_req_buf(exp_o, &be, 4, 0, "experts") < 0)
        goto done;
    Py_ssize_t nd = bl.b.len / 4;
    const long long *offs = (const long long *)bo.b.buf;
    const int *lay = (const int *)bl.b.buf;
    const int *ex = (const int *)be.b.buf;
    Py_ssize_t nexp = be.b.len / 4;
    if (nd > INT_MAX - 1 || bo.b.len / 8 < nd + 1 || offs[0] != 0 || offs[nd] > nexp) {
        PyErr_SetString(PyExc_ValueError, "_fast.belady: offs do not fit the experts");
        goto done;
    }
    int maxl = -1;
    for (Py_ssize_t d = 0; d < nd; d++) {
        if (offs[d + 1] < offs[d] || lay[d] < 0) {
            PyErr_SetString(PyExc_ValueError, "_fast.belady: bad offsets or layers");
            goto done;
        }
        if (lay[d] > maxl) maxl = lay[d];
    }
    for (Py_ssize_t i = 0; i < offs[nd]; i++)
        if (ex[i] < 0 || ex[i] >= E) { PyErr_SetString(PyExc_ValueError, "_fast.belady: an expert id out of range"); goto done; }
    long nl = maxl + 1;
    if (nl > 0 && E > LLONG_MAX / nl) { PyErr_SetString(PyExc_OverflowError, "_fast.belady: too many keys"); goto done; }
    long long nkeys = (long long)nl * E;
    if (pin_o != Py_None && get_buf(pin_o, &bp, 8, 0, "pinned") < 0) goto done;

    /* the dispatches kept, and the accesses they make */
    dlist = (int *)malloc((size_t)(nd ? nd : 1) * sizeof(int));
    if (!dlist) { PyErr_NoMemory(); goto done; }
    Py_ssize_t n = 0, total = 0, W = 1;
    for (Py_ssize_t d = 0; d < nd; d++) {
        if (only >= 0 && lay[d] != only) continue;
        dlist[n++] = (int)d;
        Py_ssize_t m = (Py_ssize_t)(offs[d + 1] - offs[d]);
        total += m;
        if (m + 1 > W) W = m + 1;
    }
    if (total > INT_MAX || (long long)(n + 1) > LLONG_MAX / W) {
        PyErr_SetString(PyExc_OverflowError, "_fast.belady: too many accesses");
        goto done;
    }
    if (out_o != Py_None) {
        if (PyObject_GetBuffer(out_o, &bout.b, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) goto done;
        bout.held = 1;
        if (bout.b.len < total) { PyErr_SetString(PyExc_ValueError, "_fast.belady: outcomes too short"); goto done; }
    }
    unsigned char *oc = bout.held ? (unsigned char *)bout.b.buf : NULL;
    const long long INF = (long long)(n + 1) * W;
    /* kid[access]: the key's dense number */
    kid = (int *)malloc((size_t)(total ? total : 1) * sizeof(int));
    if (!kid) { PyErr_NoMemory(); goto done; }
    Py_ssize_t nk;
    int direct = nkeys <= BELADY_DIRECT_KEYS || nkeys <= 2 * (long long)total;
    if (direct) {
        nk = (Py_ssize_t)nkeys;
        Py_ssize_t at = 0;
        for (Py_ssize_t j = 0; j < n; j++) {
            Py_ssize_t d = dlist[j], s = (Py_ssize_t)offs[d], m = (Py_ssize_t)(offs[d + 1] - offs[d]);
            for (Py_ssize_t i = 0; i < m; i++) kid[at++] = (int)((long long)lay[d] * E + ex[s + i]);
        }
    } else {
        uk = (long long *)malloc((size_t)(total ? total : 1) * sizeof(long long));
        if (!uk) { PyErr_NoMemory(); goto done; }
        Py_ssize_t at = 0;
        for (Py_ssize_t j = 0; j < n; j++) {
            Py_ssize_t d = dlist[j], s = (Py_ssize_t)offs[d], m = (Py_ssize_t)(offs[d + 1] - offs[d]);
            for (Py_ssize_t i = 0; i < m; i++) uk[at++] = (long long)lay[d] * E + ex[s + i];
        }
        qsort(uk, (size_t)total, sizeof(long long), cmp_ll);
        nk = 0;
        for (Py_ssize_t i = 0; i < total; i++) if (!nk || uk[i] != uk[nk - 1]) uk[nk++] = uk[i];
        at = 0;
        for (Py_ssize_t j = 0; j < n; j++) {
            Py_ssize_t d = dlist[j], s = (Py_ssize_t)offs[d], m = (Py_ssize_t)(offs[d + 1] - offs[d]);
            for (Py_ssize_t i = 0; i < m; i++)
                kid[at++] = (int)key_index(uk, nk, (long long)lay[d] * E + ex[s + i]);
        }
    }
    if (nk > INT_MAX) { PyErr_SetString(PyExc_OverflowError, "_fast.belady: too many keys"); goto done; }
    /* a cache that holds every key there is never evicts: the same as one that big */
    if (cap > nk) cap = nk;
    pin_c = (unsigned char *)calloc((size_t)(nk ? nk : 1), 1);
    if (!pin_c) { PyErr_NoMemory(); goto done; }
    if (bp.held) {
        const long long *pk = (const long long *)bp.b.buf;
        for (Py_ssize_t i = 0; i < bp.b.len / 8; i++) {
            long long k = pk[i];
            if (k < 0 || k >= nkeys) continue;
            Py_ssize_t c = direct ? (Py_ssize_t)k : key_index(uk, nk, k);
            if (c >= 0) pin_c[c] = 1;
        }
    }
    last = (long long *)malloc((size_t)(nk ? nk : 1) * sizeof(long long));
    res_nu = (long long *)malloc((size_t)(nk ? nk : 1) * sizeof(long long));
    adm = (int *)malloc((size_t)(nk ? nk : 1) * sizeof(int));
    nxt = (long long *)malloc((size_t)(total ? total : 1) * sizeof(long long));
    tmp = (long long *)malloc((size_t)W * sizeof(long long));
    admk = (int *)malloc((size_t)W * sizeof(int));
    lacc = (long long *)calloc((size_t)(nl ? nl : 1), sizeof(long long));
    lmiss = (long long *)calloc((size_t)(nl ? nl : 1), sizeof(long long));
    order = (int *)malloc((size_t)(nl ? nl : 1) * sizeof(int));
    if (!last || !res_nu || !adm || !nxt || !tmp || !admk || !lacc || !lmiss || !order) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t k = 0; k < nk; k++) { last[k] = INF; res_nu[k] = -1; adm[k] = -1; }

    /* backwards: each access's next-use priority */
    Py_ssize_t at = total;
    for (Py_ssize_t j = n - 1; j >= 0; j--) {
        Py_ssize_t d = dlist[j];
        Py_ssize_t m = (Py_ssize_t)(offs[d + 1] - offs[d]);
        at -= m;
        const int *ks = kid + at;
        for (Py_ssize_t i = 0; i < m; i++) nxt[at + i] = last[ks[i]];
        long long pbase = (long long)j * W;
        if (m == 1) {
            last[ks[0]] = pbase;
        } else if (m <= 16) {
            for (Py_ssize_t i = 0; i < m; i++) {
                long long v = nxt[at + i], r = 0;
                for (Py_ssize_t q = 0; q < m; q++) r += nxt[at + q] < v;
                tmp[i] = r;
            }
            for (Py_ssize_t i = 0; i < m; i++) last[ks[i]] = pbase + tmp[i];
        } else {                       /* rank = how many are smaller: sort, binary search */
            memcpy(tmp, nxt + at, (size_t)m * sizeof(long long));
            qsort(tmp, (size_t)m, sizeof(long long), cmp_ll);
            for (Py_ssize_t i = 0; i < m; i++) {
                long long v = nxt[at + i];
                Py_ssize_t lo = 0, hi = m;
                while (lo < hi) { Py_ssize_t mid = (lo + hi) / 2; if (tmp[mid] < v) lo = mid + 1; else hi = mid; }
                last[ks[i]] = pbase + lo;
            }
        }
    }

    /* forwards: the decisions (heap entries carry the dense key number; a tie on the
     * priority goes to the lower one, which is the lower key in either numbering) */
    long long hits = 0, loads = 0, streamed = 0, evictions = 0, accesses = 0;
    Py_ssize_t nres = 0, limit = 4 * (cap + 16), nord = 0;
    at = 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        Py_ssize_t d = dlist[j];
        Py_ssize_t m = (Py_ssize_t)(offs[d + 1] - offs[d]);
        Py_ssize_t nadm = 0, nnew = 0;
        accesses += m;
        if (m) {
            if (lacc[lay[d]] == 0) order[nord++] = lay[d];
            lacc[lay[d]] += m;
        }
        for (Py_ssize_t pos = 0; pos < m; pos++) {
            int key = kid[at + pos];
            long long nu = nxt[at + pos];
            if (oc) oc[at + pos] = 2;
            if (res_nu[key] >= 0) {            /* a hit: protected until the dispatch ends */
                hits++;
                res_nu[key] = nu;
                tmp[nnew++] = key;
                if (oc) oc[at + pos] = 0;
                continue;
            }
            if (pin_c[key]) { hits++; if (oc) oc[at + pos] = 0; continue; }
            lmiss[lay[d]]++;
            if (nu >= INF || cap == 0) { streamed++; continue; }
            if (nres < cap) {
                res_nu[key] = nu; nres++;
                if (bh_push(&heap, (BHe){nu, key}) < 0) goto done;
                loads++;
                adm[key] = (int)pos; admk[nadm++] = key;
                continue;
            }
            while (heap.n && res_nu[heap.a[0].k] != heap.a[0].nu) bh_pop(&heap);   /* stale */
            if (heap.n && heap.a[0].nu > nu) {
                int vk = heap.a[0].k;           /* the victim leaves, the key enters */
                heap.a[0] = (BHe){nu, key};
                bh_sift_down(&heap, 0);
                res_nu[vk] = -1;
                if (adm[vk] >= 0) {             /* loaded by this very dispatch: it streamed */
                    loads--; streamed++;
                    adm[vk] = -1;
                } else {
                    evictions++;
                }
                res_nu[key] = nu;
                loads++;
                adm[key] = (int)pos; admk[nadm++] = key;
            } else {
                streamed++;
            }
        }
        for (Py_ssize_t i = 0; i < nadm; i++) {
            int k = admk[i];
            if (adm[k] >= 0) { if (oc) oc[at + adm[k]] = 1; adm[k] = -1; }
        }
        for (Py_ssize_t i = 0; i < nnew; i++)
            if (bh_push(&heap, (BHe){res_nu[tmp[i]], (int)tmp[i]}) < 0) goto done;
        if (nnew && heap.n > limit) {          /* keep the lazy heap small */
            heap.n = 0;
            for (Py_ssize_t k = 0; k < nk; k++)
                if (res_nu[k] >= 0 && bh_push(&heap, (BHe){res_nu[k], (int)k}) < 0) goto done;
            bh_heapify(&heap);
        }
        at += m;
    }
    {
        PyObject *pa = PyList_New(nl), *ph = PyList_New(nl), *po = PyList_New(nord);
        int ok = pa && ph && po;
        for (long l = 0; ok && l < nl; l++) {
            PyObject *x = PyLong_FromLongLong(lacc[l]), *y = x ? PyLong_FromLongLong(lacc[l] - lmiss[l]) : NULL;
            if (!y) { Py_XDECREF(x); ok = 0; break; }
            PyList_SET_ITEM(pa, l, x);
            PyList_SET_ITEM(ph, l, y);
        }
        for (Py_ssize_t i = 0; ok && i < nord; i++) {
            PyObject *x = PyLong_FromLong(order[i]);
            if (!x) { ok = 0; break; }
            PyList_SET_ITEM(po, i, x);
        }
        if (!ok) { Py_XDECREF(pa); Py_XDECREF(ph); Py_XDECREF(po); goto done; }
        result = Py_BuildValue("(LLLLLNNN)", accesses, hits, loads, streamed, evictions, pa, ph, po);
    }
done:
    rel_buf(&bo); rel_buf(&bl); rel_buf(&be); rel_buf(&bp);
    if (bout.held) PyBuffer_Release(&bout.b);
    free(last); free(nxt); free(tmp); free(res_nu); free(dlist); free(adm); free(admk);
    free(lacc); free(lmiss); free(order); free(heap.a); free(kid); free(uk); free(pin_c);
    return result;
}

static PyMethodDef belady_methods[] = {
    {"belady", belady_belady, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int belady_init_module(PyObject *m) {
    belady_methods[0].ml_doc = belady_doc;
    return PyModule_AddFunctions(m, belady_methods);
}
