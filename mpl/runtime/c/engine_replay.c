/* A replay: the records of a packed trace (mpl.runtime.compiled.Packed) through the engine's
 * own dispatch, each played on the simulated timeline in C (timeline.h) — the loop of the
 * generated replay_records, with no Python object per record.
 *
 * The packed arrays are read through the buffer protocol; every record is checked as it is
 * read (a progress tick is Python code and could write into them), and the record's
 * predictions and tokens per expert are copied into C memory before the lock is taken. */
#include "engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "timeline.h"

typedef struct { Py_buffer b; int held; } Buf;

static int get_buf(PyObject *p, const char *name, Buf *x, const char *fmt, int optional) {
    x->held = 0;
    PyObject *v = PyObject_GetAttrString(p, name);
    if (!v) return -1;
    if (v == Py_None && optional) { Py_DECREF(v); return 0; }
    int rc = PyObject_GetBuffer(v, &x->b, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS);
    Py_DECREF(v);
    if (rc < 0) return -1;
    x->held = 1;
    if (!x->b.format || strcmp(x->b.format, fmt) != 0) {
        PyErr_Format(PyExc_TypeError, "packed trace: %s must be an array of type '%s'", name, fmt);
        return -1;
    }
    return 0;
}

static void rel_buf(Buf *x) { if (x->held) PyBuffer_Release(&x->b); x->held = 0; }

/* per record: -1, or the offset of its per-expert tokens (multi) / its predictions */
typedef struct {
    long records;
    long *moff;             /* records: offset into mtok, -1: one token each */
    int64_t *mtok;
    long *poff;             /* records + 1: its predictions' entries [poff[i], poff[i+1]) */
    long *pl, *pstart, *plen;
    long *pids;
} Side;

static void side_free(Side *s) {
    free(s->moff); free(s->mtok); free(s->poff); free(s->pl); free(s->pstart); free(s->plen); free(s->pids);
}

static int nomem_side(void) { PyErr_NoMemory(); return -1; }

/* A private copy of the packed object's list attribute ``name`` (NULL with an exception):
 * the two passes over it below read the same entries whatever code a lookup runs. */
static PyObject *list_copy(PyObject *packed, const char *name, const char *err) {
    PyObject *v = PyObject_GetAttrString(packed, name);
    if (!v) return NULL;
    if (v == Py_None) return v;
    PyObject *f = PySequence_Fast(v, err);
    Py_DECREF(v);
    if (!f) return NULL;
    PyObject *copy = PySequence_List(f);
    Py_DECREF(f);
    return copy;
}

/* One (record index, dict) entry of multi or predictions: the index an int (never converted
 * through __index__, so no user code runs), in 0..records-1. */
static int side_entry(PyObject *it, long records, long *idx, PyObject **d, const char *what) {
    int ovf = 0;
    if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 2 || !PyLong_Check(PyTuple_GET_ITEM(it, 0))
        || !PyDict_Check(PyTuple_GET_ITEM(it, 1))) {
        PyErr_Format(PyExc_TypeError, "packed trace: %s entries are (record, dict)", what);
        return -1;
    }
    *idx = PyLong_AsLongAndOverflow(PyTuple_GET_ITEM(it, 0), &ovf);
    *d = PyTuple_GET_ITEM(it, 1);
    if (ovf || *idx < 0 || *idx >= records) {
        PyErr_Format(PyExc_ValueError, "packed trace: a %s entry names no record", what);
        return -1;
    }
    return 0;
}

/* the records' tokens per expert and predictions, from the packed object's Python lists,
 * into C memory (checked), before the replay starts */
static int side_load(Engine *o, PyObject *packed, const int *offs, const int *experts, long records, Side *s) {
    memset(s, 0, sizeof *s);
    s->records = records;
    PyObject *mf = list_copy(packed, "multi", "packed trace: multi must be a list");
    if (!mf) return -1;
    if (mf == Py_None) { Py_DECREF(mf); PyErr_SetString(PyExc_TypeError, "packed trace: multi must be a list"); return -1; }
    Py_ssize_t nm = PyList_GET_SIZE(mf);
    int rc = -1;
    if (nm) {
        if (!(s->moff = malloc(sizeof(long) * (size_t)(records ? records : 1)))) { nomem_side(); goto out; }
        for (long i = 0; i < records; i++) s->moff[i] = -1;
        long total = 0;
        for (Py_ssize_t j = 0; j < nm; j++) {
            long idx;
            PyObject *d;
            if (side_entry(PyList_GET_ITEM(mf, j), records, &idx, &d, "multi") < 0) goto out;
            total += offs[idx + 1] - offs[idx];
        }
        if (!(s->mtok = malloc(sizeof(int64_t) * (size_t)(total ? total : 1)))) { nomem_side(); goto out; }
        long at = 0;
        for (Py_ssize_t j = 0; j < nm; j++) {
            /* the copy's entries are the tuples checked above (tuples do not change) */
            PyObject *it = PyList_GET_ITEM(mf, j), *d = PyTuple_GET_ITEM(it, 1);
            long idx = PyLong_AsLong(PyTuple_GET_ITEM(it, 0));
            s->moff[idx] = at;
            for (int q = offs[idx]; q < offs[idx + 1]; q++) {
                PyObject *k = PyLong_FromLong(experts[q]);
                if (!k) goto out;
                /* (a lookup may run a key's __eq__, which may change the dict: the
                 * value is taken with a reference and read without calling user code) */
                PyObject *v = PyDict_GetItemWithError(d, k);
                Py_XINCREF(v);
                Py_DECREF(k);
                long long t = 1;
                if (v) {
                    int ovf = 0;
                    t = PyLong_Check(v) ? PyLong_AsLongLongAndOverflow(v, &ovf) : 0;
                    Py_DECREF(v);
                    if (ovf) t = 0;
                } else if (PyErr_Occurred()) goto out;
                if (t < 1 || t > TOKENS_MAX) { PyErr_SetString(PyExc_ValueError, "packed trace: a token count out of range"); goto out; }
                s->mtok[at++] = t;
            }
        }
    }
    PyObject *pf = list_copy(packed, "predictions", "packed trace: predictions must be a list");
    if (!pf) goto out;
    if (pf != Py_None) {
        /* no user code runs from here to the end (exact type checks, PyDict_Next), so the
         * dicts and lists counted in the first pass are the ones the second fills from */
        Py_ssize_t np = PyList_GET_SIZE(pf);
        long entries = 0, ids = 0;
        for (Py_ssize_t j = 0; j < np; j++) {
            PyObject *it = PyList_GET_ITEM(pf, j), *d;
            long idx;
            if (side_entry(it, records + 1, &idx, &d, "prediction") < 0) {
                Py_DECREF(pf);
                goto out;
            }
            entries += (long)PyDict_GET_SIZE(d);
            PyObject *k, *v;
            Py_ssize_t pos = 0;
            while (PyDict_Next(d, &pos, &k, &v)) {
                if (!PyList_Check(v) && !PyTuple_Check(v)) {
                    PyErr_SetString(PyExc_TypeError, "packed trace: predictions are lists of ids");
                    Py_DECREF(pf);
                    goto out;
                }
                ids += (long)PySequence_Fast_GET_SIZE(v);
            }
        }
        s->poff = calloc((size_t)records + 1, sizeof(long));
        s->pl = malloc(sizeof(long) * (size_t)(entries ? entries : 1));
        s->pstart = malloc(sizeof(long) * (size_t)(entries ? entries : 1));
        s->plen = malloc(sizeof(long) * (size_t)(entries ? entries : 1));
        s->pids = malloc(sizeof(long) * (size_t)(ids ? ids : 1));
        if (!s->poff || !s->pl || !s->pstart || !s->plen || !s->pids) { Py_DECREF(pf); nomem_side(); goto out; }
        /* per record its entries, records in order */
        long e = 0, at = 0, prev = -1;
        for (Py_ssize_t j = 0; j < np; j++) {
            PyObject *it = PyList_GET_ITEM(pf, j), *d = PyTuple_GET_ITEM(it, 1);
            long idx = PyLong_AsLong(PyTuple_GET_ITEM(it, 0));
            if (idx <= prev || idx >= records) {
                PyErr_SetString(PyExc_ValueError, "packed trace: predictions must name records in order");
                Py_DECREF(pf);
                goto out;
            }
            for (long r = prev + 1; r <= idx; r++) s->poff[r] = e;
            prev = idx;
            PyObject *k, *v;
            Py_ssize_t pos = 0;
            while (PyDict_Next(d, &pos, &k, &v)) {
                int ovf;
                long l = PyLong_CheckExact(k) ? PyLong_AsLongAndOverflow(k, &ovf) : -1;
                if (!PyLong_CheckExact(k) || ovf || l < 0 || l >= o->L) {
                    PyErr_SetString(PyExc_ValueError, "packed trace: a prediction names a layer out of range");
                    Py_DECREF(pf);
                    goto out;
                }
                Py_ssize_t m = PySequence_Fast_GET_SIZE(v);
                PyObject **items = PySequence_Fast_ITEMS(v);
                s->pl[e] = l;
                s->pstart[e] = at;
                s->plen[e] = (long)m;
                for (Py_ssize_t q = 0; q < m; q++) {
                    long x = PyLong_CheckExact(items[q]) ? PyLong_AsLongAndOverflow(items[q], &ovf) : -1;
                    if (!PyLong_CheckExact(items[q]) || ovf || x < 0 || x >= o->E) {
                        PyErr_SetString(PyExc_ValueError, "packed trace: a prediction names an expert out of range");
                        Py_DECREF(pf);
                        goto out;
                    }
                    s->pids[at++] = x;
                }
                e++;
            }
        }
        for (long r = prev + 1; r <= records; r++) s->poff[r] = e;
        Py_DECREF(pf);
    } else Py_DECREF(pf);
    rc = 0;
out:
    Py_DECREF(mf);
    return rc;
}

/* the PlanRec view of a record */
static void plan_view(const Engine *o, const Rec *r, PlanRec *p) {
    p->step = r->step;
    p->layer = r->layer;
    p->E = o->E;
    p->n = r->n;
    p->experts = r->experts;
    p->where = r->where;
    p->hit = r->hit;
    p->loads = r->loads;
    p->nloads = r->nloads;
    p->evicted = r->ev;
    p->nevicted = r->nev;
}

/* the Python timeline's dispatch(plan, tokens_of, tokens) for a timeline the C side does not
 * hold (the lock released by the caller): 0 and *stall, or -1 with an exception */
static int py_timeline(Engine *o, PyObject *tl, const Rec *r, const int64_t *tok, long long tokens,
                       double *stall);

PyObject *engine_replay(Engine *o, PyObject *args) {
    PyObject *packed, *tl, *tick = Py_None;
    long long every = 0;
    if (!PyArg_ParseTuple(args, "OO|OL:replay", &packed, &tl, &tick, &every)) return NULL;
    if (every < 0) { PyErr_SetString(PyExc_ValueError, "replay: every must be >= 0"); return NULL; }
    if (every && !PyCallable_Check(tick)) { PyErr_SetString(PyExc_TypeError, "replay: tick must be callable"); return NULL; }
    Buf bl, bo, be, bw, bs, bt, bh;
    memset(&bh, 0, sizeof bh); memset(&bw, 0, sizeof bw);
    bl.held = bo.held = be.held = bs.held = bt.held = 0;
    PyObject *result = NULL;
    Side side;
    memset(&side, 0, sizeof side);
    TL *T = NULL;
    MonRec *logs = NULL;
    long nlogs = 0, *seen = NULL;
    if (get_buf(packed, "layers", &bl, "i", 0) < 0 || get_buf(packed, "offs", &bo, "i", 0) < 0 ||
            get_buf(packed, "experts", &be, "i", 0) < 0 || get_buf(packed, "weights", &bw, "d", 1) < 0 ||
            get_buf(packed, "steps", &bs, "q", 0) < 0 || get_buf(packed, "tokens", &bt, "i", 0) < 0 ||
            get_buf(packed, "has_w", &bh, "b", 1) < 0)
        goto done;
    long records = (long)(bl.b.len / (Py_ssize_t)sizeof(int));
    if (bo.b.len / (Py_ssize_t)sizeof(int) != records + 1 || bs.b.len / (Py_ssize_t)sizeof(int64_t) != records ||
            bt.b.len / (Py_ssize_t)sizeof(int) != records || (bh.held && bh.b.len != records)) {
        PyErr_SetString(PyExc_ValueError, "packed trace: its arrays do not agree in length");
        goto done;
    }
    const int *layers = bl.b.buf, *offs = bo.b.buf, *experts = be.b.buf, *toks = bt.b.buf;
    const double *weights = bw.held ? bw.b.buf : NULL;
    const int64_t *steps = bs.b.buf;
    const signed char *has_w = bh.held ? bh.b.buf : NULL;
    long nexp = (long)(be.b.len / (Py_ssize_t)sizeof(int)), nw = bw.held ? (long)(bw.b.len / (Py_ssize_t)sizeof(double)) : 0;
    if (offs[0] != 0 || offs[records] != nexp) { PyErr_SetString(PyExc_ValueError, "packed trace: bad offsets"); goto done; }
    if (side_load(o, packed, offs, experts, records, &side) < 0) goto done;
    if (tl_load(&T, tl, o->L, o->E) < 0) goto done;
    int logs_on = monitor_logging_on();
    if (logs_on < 0) goto done;
    /* per expert the last record (its index + 1) that named it: repeats found without a
     * second pass (the replay's own memory, made before the lock is taken) */
    if (!(seen = calloc((size_t)o->E, sizeof(long)))) { PyErr_NoMemory(); goto done; }
    if (engine_lock(o, "a replay") < 0) goto done;
    o->replaying = (long)PyThread_get_thread_ident();
    const long E = o->E, L = o->L;        /* (the shape is fixed for the engine's life) */
    long count = 0, woff = 0;
    int err = 0;          /* 1 memory, 2 step, 3 bad record, 4 an exception (lock released) */
    long bad = -1;
    const char *why = NULL;
    for (long i = 0; i < records; i++) {
        long a0 = offs[i], a1 = offs[i + 1];
        long n = a1 - a0;
        /* (a0 >= 0: a tick may have rewritten the offsets since the previous record) */
        if (a0 < 0 || n < 0 || n > E || a1 > nexp) { err = 3; bad = i; why = "bad offsets"; break; }
        long layer = layers[i];
        if (layer < 0 || layer >= L) { err = 3; bad = i; why = "a layer out of range"; break; }
        int rw = weights && (!has_w || has_w[i]);
        if (rw && woff + n > nw) { err = 3; bad = i; why = "too few weights"; break; }
        /* the ids: in range and distinct (the pack made them distinct) */
        int ok = 1;
        const int *rex = experts + a0;
        const long tag = i + 1;
        long *ex = o->ex;
        double *wv = o->wv;
        for (long j = 0; j < n; j++) {
            long e = rex[j];
            if ((unsigned long)e >= (unsigned long)E || seen[e] == tag) { ok = 0; break; }
            seen[e] = tag;
            ex[j] = e;
        }
        if (ok && rw) {
            const double *rw8 = weights + woff;
            for (long j = 0; j < n; j++) {
                double w = rw8[j];
                if (!isfinite(w)) { ok = 0; break; }
                wv[j] = w;
            }
        }
        if (!ok) { err = 3; bad = i; why = "an expert id out of range, repeated, or a weight not finite"; break; }
        long long tokens = toks[i];
        if (tokens < 1 && !(tokens == 0 && n == 0)) { err = 3; bad = i; why = "a token count below 1"; break; }
        int64_t st = steps[i];
        if (st < -1 || st > STEP_MAX) { err = 3; bad = i; why = "a step out of range"; break; }
        Args a = {layer, n, ex, rw ? wv : NULL, tokens, st, 0};
        if (rw) woff += n;
        if (side.poff && side.poff[i + 1] > side.poff[i]) {
            long total = 0;
            for (long q = side.poff[i]; q < side.poff[i + 1]; q++) total += side.plen[q];
            void *np = o->pr_ids;
            long cap = o->pr_cap;
            if (total > cap) {
                np = realloc(o->pr_ids, sizeof(long) * (size_t)total);
                if (!np) { err = 1; break; }
                o->pr_ids = np;
                o->pr_cap = total;
            }
            o->pr_call++;
            long at = 0;
            for (long q = side.poff[i]; q < side.poff[i + 1]; q++) {
                long l = side.pl[q];
                o->pr_at[l] = o->pr_call;
                o->pr_off[l] = at;
                o->pr_len[l] = side.plen[q];
                if (side.plen[q])
                    memcpy(o->pr_ids + at, side.pids + side.pstart[q], sizeof(long) * (size_t)side.plen[q]);
                at += side.plen[q];
            }
            a.given = 1;
        }
        Rec *r = &o->rrec;
        if (rec_size(r, n) < 0 || engine_reserve(o, &a, r) < 0) { err = 1; break; }
        if (st < 0 && layer <= o->last_layer && o->step >= STEP_MAX) { err = 2; break; }
        if (engine_dispatch_core(o, &a, r) < 0) { err = 1; break; }
        const int64_t *tok = side.moff && side.moff[i] >= 0 ? side.mtok + side.moff[i] : NULL;
        double stall;
        if (T) {
            PlanRec p;
            plan_view(o, r, &p);
            stall = tl_play(T, &p, tokens, tok);
        } else {
            o->frozen = 1;        /* the Python timeline: user code, the state whole and frozen */
            int prc = py_timeline(o, tl, r, tok, tokens, &stall);
            o->frozen = 0;
            if (prc < 0) { err = 4; break; }
        }
        if (stall > 0) o->stall += stall;
        count++;
        int pending = o->nmlog > o->mlog_emitted;
        int ticking = every && count % every == 0;
        if (pending && !logs_on) { o->mlog_emitted = o->nmlog; pending = 0; }
        if (pending || ticking) {
            /* Python code runs next (log handlers, the tick): the state is whole; it stays
             * frozen meanwhile (reads from any thread are served, changes refused), and the
             * clocks are in the timeline */
            if (pending && take_monitor_log(o, &logs, &nlogs) < 0) { err = 1; break; }
            o->frozen = 1;
            int fail = T && tl_store(T) < 0;
            if (!fail && nlogs) fail = emit_monitor_log(o, logs, nlogs) < 0;
            free(logs);
            logs = NULL;
            nlogs = 0;
            if (!fail && ticking) {
                PyObject *x = PyObject_CallFunction(tick, "l", count);
                if (!x) fail = 1;
                Py_XDECREF(x);
                if (!fail && (logs_on = monitor_logging_on()) < 0) fail = 1;
            }
            if (!fail && T) {          /* the tick may have changed the timeline */
                int rr = tl_reload(T);
                if (rr < 0) fail = 1;
                else if (rr == 1) { tl_free(T); T = NULL; }
            }
            o->frozen = 0;
            if (fail) { err = 4; break; }
        }
    }
    if (!err && take_monitor_log(o, &logs, &nlogs) < 0) err = 1;
    o->replaying = 0;
    engine_unlock(o);
    if (T) {   /* the timeline as of the last record played, with no exception pending while
                * it is stored (an exception already raised is the one the replay raises) */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        if (tl_store(T) < 0 && !err) err = 4;
        if (et) {
            if (err == 4 && PyErr_Occurred()) PyErr_Clear();
            PyErr_Restore(et, ev, tb);
        }
    }
    if (!err && nlogs && emit_monitor_log(o, logs, nlogs) < 0) err = 4;
    if (err == 1) PyErr_NoMemory();
    else if (err == 2) PyErr_SetString(DispatchError, "the step counter would pass 2**62: give steps explicitly below it");
    else if (err == 3) PyErr_Format(PyExc_ValueError, "packed trace: record %ld: %s", bad, why);
    if (!err) result = PyLong_FromLong(count);
done:
    free(seen);
    free(logs);
    if (T) tl_free(T);
    side_free(&side);
    rel_buf(&bl); rel_buf(&bo); rel_buf(&be); rel_buf(&bw); rel_buf(&bs); rel_buf(&bt); rel_buf(&bh);
    return result;
}

static int py_timeline(Engine *o, PyObject *tl, const Rec *r, const int64_t *tok, long long tokens,
                       double *stall) {
    PyObject *plan = engine_plan_of(o, r, NULL, NULL);
    if (!plan) return -1;
    PyObject *tokens_of = Py_None;
    Py_INCREF(tokens_of);
    if (tok) {
        Py_DECREF(tokens_of);
        tokens_of = PyDict_New();
        for (long j = 0; tokens_of && j < r->n; j++) {
            PyObject *k = PyLong_FromLong(r->experts[j]), *v = PyLong_FromLongLong(tok[j]);
            if (!k || !v || PyDict_SetItem(tokens_of, k, v) < 0) Py_CLEAR(tokens_of);
            Py_XDECREF(k); Py_XDECREF(v);
        }
        if (!tokens_of) { Py_DECREF(plan); return -1; }
    }
    PyObject *x = PyObject_CallMethod(tl, "dispatch", "OOL", plan, tokens_of, tokens);
    Py_DECREF(plan);
    Py_DECREF(tokens_of);
    if (!x) return -1;
    double s = PyFloat_AsDouble(x);
    Py_DECREF(x);
    if (s == -1.0 && PyErr_Occurred()) return -1;
    *stall = s;
    return 0;
}
