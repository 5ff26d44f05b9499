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
"dispatches; pinned: a bytes mask over keys or None; outcomes: a writable uint8 buffer\n"
"per access (of the dispatches kept) or None. Returns (accesses, hits, loads, streamed,\n"
"evictions, per-layer accesses, per-layer hits, layers in order of first use). See\n"
"mpl/sim/belady.py (the caller, and the reference).";

static PyObject *fast_belady(PyObject *self, PyObject *args) {
    PyObject *offs_o, *layers_o, *exp_o, *pin_o, *out_o;
    long E, only;
    Py_ssize_t cap;
    if (!PyArg_ParseTuple(args, "OOOlnOlO", &offs_o, &layers_o, &exp_o, &E, &cap, &pin_o, &only, &out_o))
        return NULL;
    Buf bo = {0}, bl = {0}, be = {0}, bp = {0}, bout = {0};
    PyObject *result = NULL;
    long long *last = NULL, *nxt = NULL, *tmp = NULL, *res_nu = NULL;
    int *dlist = NULL, *adm = NULL, *admk = NULL;
    long long *lacc = NULL, *lmiss = NULL;
    int *order = NULL;
    BHeap heap = {0};
    if (E < 1) { PyErr_SetString(PyExc_ValueError, "_fast.belady: num_experts must be >= 1"); return NULL; }
    if (get_buf(offs_o, &bo, 8, 1, "offs") < 0 || get_buf(layers_o, &bl, 4, 0, "layers") < 0 ||
        get_buf(exp_o, &be, 4, 0, "experts") < 0)
        goto done;
    Py_ssize_t nd = bl.b.len / 4;
    const long long *offs = (const long long *)bo.b.buf;
    const int *lay = (const int *)bl.b.buf;
    const int *ex = (const int *)be.b.buf;
    Py_ssize_t nexp = be.b.len / 4;
    if (bo.b.len / 8 < nd + 1 || offs[0] != 0 || offs[nd] > nexp) {
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
    Py_ssize_t nkeys = (Py_ssize_t)nl * E;
    if (nl > 0 && nkeys / nl != E) { PyErr_NoMemory(); goto done; }
    if (pin_o != Py_None) {
        if (get_buf(pin_o, &bp, 1, nkeys, "pinned") < 0) goto done;
    }
    const unsigned char *pinned = bp.held ? (const unsigned char *)bp.b.buf : NULL;

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
    if (out_o != Py_None) {
        if (PyObject_GetBuffer(out_o, &bout.b, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) goto done;
        bout.held = 1;
        if (bout.b.len < total) { PyErr_SetString(PyExc_ValueError, "_fast.belady: outcomes too short"); goto done; }
    }
    unsigned char *oc = bout.held ? (unsigned char *)bout.b.buf : NULL;
    const long long INF = (long long)(n + 1) * W;
    last = (long long *)malloc((size_t)(nkeys ? nkeys : 1) * sizeof(long long));
    res_nu = (long long *)malloc((size_t)(nkeys ? nkeys : 1) * sizeof(long long));
    adm = (int *)malloc((size_t)(nkeys ? nkeys : 1) * sizeof(int));
    nxt = (long long *)malloc((size_t)(total ? total : 1) * sizeof(long long));
    tmp = (long long *)malloc((size_t)W * sizeof(long long));
    admk = (int *)malloc((size_t)W * sizeof(int));
    lacc = (long long *)calloc((size_t)(nl ? nl : 1), sizeof(long long));
    lmiss = (long long *)calloc((size_t)(nl ? nl : 1), sizeof(long long));
    order = (int *)malloc((size_t)(nl ? nl : 1) * sizeof(int));
    if (!last || !res_nu || !adm || !nxt || !tmp || !admk || !lacc || !lmiss || !order) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t k = 0; k < nkeys; k++) { last[k] = INF; res_nu[k] = -1; adm[k] = -1; }

    /* backwards: each access's next-use priority */
    Py_ssize_t at = total;
    for (Py_ssize_t j = n - 1; j >= 0; j--) {
        Py_ssize_t d = dlist[j];
        Py_ssize_t s = (Py_ssize_t)offs[d], m = (Py_ssize_t)(offs[d + 1] - offs[d]);
        long long base = (long long)lay[d] * E;
        at -= m;
        for (Py_ssize_t i = 0; i < m; i++) nxt[at + i] = last[base + ex[s + i]];
        long long pbase = (long long)j * W;
        if (m == 1) {
            last[base + ex[s]] = pbase;
        } else if (m <= 16) {
            for (Py_ssize_t i = 0; i < m; i++) {
                long long v = nxt[at + i], r = 0;
                for (Py_ssize_t q = 0; q < m; q++) r += nxt[at + q] < v;
                tmp[i] = r;
            }
            for (Py_ssize_t i = 0; i < m; i++) last[base + ex[s + i]] = pbase + tmp[i];
        } else {                       /* rank = how many are smaller: sort, binary search */
            memcpy(tmp, nxt + at, (size_t)m * sizeof(long long));
            qsort(tmp, (size_t)m, sizeof(long long), cmp_ll);
            for (Py_ssize_t i = 0; i < m; i++) {
                long long v = nxt[at + i];
                Py_ssize_t lo = 0, hi = m;
                while (lo < hi) { Py_ssize_t mid = (lo + hi) / 2; if (tmp[mid] < v) lo = mid + 1; else hi = mid; }
                last[base + ex[s + i]] = pbase + lo;
            }
        }
    }

    /* forwards: the decisions */
    long long hits = 0, loads = 0, streamed = 0, evictions = 0, accesses = 0;
    Py_ssize_t nres = 0, limit = 4 * (cap + 16), nord = 0;
    at = 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        Py_ssize_t d = dlist[j];
        Py_ssize_t s = (Py_ssize_t)offs[d], m = (Py_ssize_t)(offs[d + 1] - offs[d]);
        long long base = (long long)lay[d] * E;
        Py_ssize_t nadm = 0, nnew = 0;
        accesses += m;
        if (m) {
            if (lacc[lay[d]] == 0) order[nord++] = lay[d];
            lacc[lay[d]] += m;
        }
        for (Py_ssize_t pos = 0; pos < m; pos++) {
            long long key = base + ex[s + pos];
            long long nu = nxt[at + pos];
            if (oc) oc[at + pos] = 2;
            if (res_nu[key] >= 0) {            /* a hit: protected until the dispatch ends */
                hits++;
                res_nu[key] = nu;
                tmp[nnew++] = key;
                if (oc) oc[at + pos] = 0;
                continue;
            }
            if (pinned && pinned[key]) { hits++; if (oc) oc[at + pos] = 0; continue; }
            lmiss[lay[d]]++;
            if (nu >= INF || cap == 0) { streamed++; continue; }
            if (nres < cap) {
                res_nu[key] = nu; nres++;
                if (bh_push(&heap, (BHe){nu, (int)key}) < 0) goto done;
                loads++;
                adm[key] = (int)pos; admk[nadm++] = (int)key;
                continue;
            }
            while (heap.n && res_nu[heap.a[0].k] != heap.a[0].nu) bh_pop(&heap);   /* stale */
            if (heap.n && heap.a[0].nu > nu) {
                int vk = heap.a[0].k;           /* the victim leaves, the key enters */
                heap.a[0] = (BHe){nu, (int)key};
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
                adm[key] = (int)pos; admk[nadm++] = (int)key;
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
            for (Py_ssize_t k = 0; k < nkeys; k++)
                if (res_nu[k] >= 0 && bh_push(&heap, (BHe){res_nu[k], (int)k}) < 0) goto done;
            bh_heapify(&heap);
        }
        at += m;
    }
    PyObject *pa = PyList_New(nl), *ph = PyList_New(nl), *po = PyList_New(nord);
    if (!pa || !ph || !po) { Py_XDECREF(pa); Py_XDECREF(ph); Py_XDECREF(po); goto done; }
    for (long l = 0; l < nl; l++) {
        PyList_SET_ITEM(pa, l, PyLong_FromLongLong(lacc[l]));
        PyList_SET_ITEM(ph, l, PyLong_FromLongLong(lacc[l] - lmiss[l]));
    }
    for (Py_ssize_t i = 0; i < nord; i++) PyList_SET_ITEM(po, i, PyLong_FromLong(order[i]));
    result = Py_BuildValue("(LLLLLNNN)", accesses, hits, loads, streamed, evictions, pa, ph, po);
done:
    rel_buf(&bo); rel_buf(&bl); rel_buf(&be); rel_buf(&bp);
    if (bout.held) PyBuffer_Release(&bout.b);
    free(last); free(nxt); free(tmp); free(res_nu); free(dlist); free(adm); free(admk);
    free(lacc); free(lmiss); free(order); free(heap.a);
    return result;
}
