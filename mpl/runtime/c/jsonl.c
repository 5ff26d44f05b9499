#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buffers.h"

/* Included by _fast.c: the rows of a JSONL trace read straight into the kernel's columns.
 *
 * jsonl_rows(data, start, max_line): the dispatch rows of a JSONL trace (mpl/traceio.py,
 * "JSONL"), from byte offset ``start`` (the line after the header) to the end of ``data``,
 * as columns: (layers, experts, weights or None, steps, k) -- the decoder-layer ids (int32),
 * the expert ids (int32, k per row), the router weights (float64, k per row) and the steps
 * (int64), as bytes. Only the common shape is taken: every row an object with the keys
 * "t", "l", "e" and optionally "s" (each at most once, in any order), "t" and "l" plain
 * non-negative JSON integers (below 2^32 and 65,536), "e" a flat list of k distinct expert
 * ids below 65,536, the same k and the same presence of "s" in every row, "s" null or a flat
 * list of k JSON numbers that are finite as doubles; blank lines (spaces, tabs, CRs)
 * between rows; nothing but ASCII. Anything else -- a row of several tokens, predictions
 * ("p"), an unknown key, a string, a line of max_line bytes or more, any byte the grammar
 * does not expect, no rows at all -- returns None, and the Python reader
 * (mpl.traceio.load_jsonl) reads the file, with its located errors. So an accepted file is
 * one the Python reader accepts, with the same values.
 *
 * The numbers are converted exactly as Python's json module converts them: an integer
 * literal is an int, made a float by float() (exact here: at most 15 digits are taken, so
 * "-0" is +0.0 as float(0) is); a literal with a fraction or an exponent is converted by
 * the exact fast path where it applies (jl_exact_decimal), else by PyOS_string_to_double,
 * the conversion float() uses. No Python code runs during the parse
 * (the buffer is a bytes object's, which cannot change). */

#define JL_MAX_ID 65536
#define JL_MAX_LAYER 65536
#define JL_NUM_MAX 64           /* the longest number literal taken in "s" */
#define JL_INT_DIGITS 15        /* the most digits of an integer literal taken in "s" */

typedef struct {
    const unsigned char *p, *end;
} JlCur;

static inline void jl_ws(JlCur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\r')) c->p++;
}

/* A non-negative JSON integer below ``limit`` (no sign, no leading zero, no fraction or
 * exponent: those are left to the Python reader). 0: taken; -1: not. */
static int jl_uint(JlCur *c, long long limit, long long *out) {
    const unsigned char *p = c->p;
    if (p >= c->end || *p < '0' || *p > '9') return -1;
    long long v = 0;
    int digits = 0;
    if (*p == '0') {
        p++;
        if (p < c->end && *p >= '0' && *p <= '9') return -1;     /* "01": not JSON */
    } else {
        while (p < c->end && *p >= '0' && *p <= '9') {
            if (++digits > 10) return -1;
            v = v * 10 + (*p - '0');
            p++;
        }
    }
    if (p < c->end && (*p == '.' || *p == 'e' || *p == 'E')) return -1;
    if (v >= limit) return -1;
    c->p = p;
    *out = v;
    return 0;
}

/* The fast path of decimal-to-double conversion (Clinger): a literal whose significant
 * digits form an integer m <= 2^53 and whose decimal exponent e is within +-22 is m * 10^e
 * or m / 10^-e, one IEEE operation on two exact doubles, hence correctly rounded -- the
 * double float() gives. 1 with *out set; 0 when the literal is not of that kind (the caller
 * takes PyOS_string_to_double). [s, end): digits, an optional fraction, an optional
 * exponent, no sign. Only where doubles are evaluated in double precision. */
static int jl_exact_decimal(const unsigned char *s, const unsigned char *end, double *out) {
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
    static const double p10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
                                   1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19,
                                   1e20, 1e21, 1e22};
    unsigned long long m = 0;
    int sig = 0;
    long e10 = 0;
    const unsigned char *p = s;
    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        if (m || *p != '0') {
            if (++sig > 18) return 0;
            m = m * 10 + (unsigned)(*p - '0');
        }
    }
    if (p < end && *p == '.') {
        for (p++; p < end && *p >= '0' && *p <= '9'; p++) {
            if (m || *p != '0') {
                if (++sig > 18) return 0;
                m = m * 10 + (unsigned)(*p - '0');
            }
            e10--;
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        int eneg = 0;
        if (p < end && (*p == '+' || *p == '-')) eneg = *p++ == '-';
        long x = 0;
        for (; p < end && *p >= '0' && *p <= '9'; p++) {
            if (x > 100000) return 0;
            x = x * 10 + (*p - '0');
        }
        e10 += eneg ? -x : x;
    }
    if (p != end || m > (1ULL << 53)) return 0;
    if (m == 0) { *out = 0.0; return 1; }
    if (e10 < -22 || e10 > 22) return 0;
    *out = e10 < 0 ? (double)m / p10[-e10] : (double)m * p10[e10];
    return 1;
#else
    (void)s; (void)end; (void)out;
    return 0;
#endif
}

/* A JSON number as Python's json module reads it, then float(): 0 taken (finite), -1 not. */
static int jl_number(JlCur *c, double *out) {
    const unsigned char *p = c->p, *s = p;
    int neg = 0, is_int = 1, digits = 0;
    if (p < c->end && *p == '-') { neg = 1; p++; }
    if (p >= c->end || *p < '0' || *p > '9') return -1;
    if (*p == '0') {
        p++; digits = 1;
        if (p < c->end && *p >= '0' && *p <= '9') return -1;
    } else {
        while (p < c->end && *p >= '0' && *p <= '9') { p++; digits++; }
    }
    if (p < c->end && *p == '.') {
        is_int = 0; p++;
        if (p >= c->end || *p < '0' || *p > '9') return -1;
        while (p < c->end && *p >= '0' && *p <= '9') p++;
    }
    if (p < c->end && (*p == 'e' || *p == 'E')) {
        is_int = 0; p++;
        if (p < c->end && (*p == '+' || *p == '-')) p++;
        if (p >= c->end || *p < '0' || *p > '9') return -1;
        while (p < c->end && *p >= '0' && *p <= '9') p++;
    }
    Py_ssize_t len = p - s;
    if (len >= JL_NUM_MAX) return -1;
    double v;
    if (is_int) {
        if (digits > JL_INT_DIGITS) return -1;
        long long iv = 0;
        for (const unsigned char *q = s + neg; q < p; q++) iv = iv * 10 + (*q - '0');
        v = (double)(neg ? -iv : iv);            /* float(int): -0 is +0.0 */
    } else if (jl_exact_decimal(s + neg, p, &v)) {
        if (neg) v = -v;                          /* "-0.0" is -0.0, as float() gives */
    } else {
        char buf[JL_NUM_MAX];
        memcpy(buf, s, (size_t)len);
        buf[len] = '\0';
        char *endp = NULL;
        v = PyOS_string_to_double(buf, &endp, NULL);
        if (v == -1.0 && PyErr_Occurred()) { PyErr_Clear(); return -1; }
        if (endp != buf + len) return -1;
    }
    if (!isfinite(v)) return -1;
    c->p = p;
    *out = v;
    return 0;
}

static int jl_lit(JlCur *c, const char *lit, Py_ssize_t n) {
    if (c->end - c->p < n || memcmp(c->p, lit, (size_t)n) != 0) return -1;
    c->p += n;
    return 0;
}

enum { JL_T = 1, JL_L = 2, JL_E = 4, JL_S = 8 };

static PyObject *jsonl_jsonl_rows(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, max_line;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &start, &max_line)) return NULL;
    PyObject *result = NULL;
    GrowBuf bl = {0}, be = {0}, bw = {0}, bs = {0};
    uint32_t *stamp = NULL;
    int32_t *row_e = NULL;
    double *row_w = NULL;
    Py_ssize_t k = -1, rows = 0, cap = 0;
    int with_s = -1;
    if (start < 0 || start > view.len || max_line < 1) {
        PyErr_SetString(PyExc_ValueError, "jsonl_rows: start outside the data, or max_line < 1");
        goto done;
    }
    stamp = calloc(JL_MAX_ID, sizeof(uint32_t));
    if (!stamp) { PyErr_NoMemory(); goto done; }
    const unsigned char *base = (const unsigned char *)view.buf;
    const unsigned char *p = base + start, *end = base + view.len;
    while (p < end) {
        const unsigned char *nl = memchr(p, '\n', (size_t)(end - p));
        const unsigned char *eol = nl ? nl : end;
        if ((eol - p) + 1 >= max_line) goto refuse;
        JlCur c = {p, eol};
        p = nl ? nl + 1 : end;
        jl_ws(&c);
        if (c.p == c.end) continue;                      /* a blank line */
        if (*c.p++ != '{') goto refuse;
        int seen = 0, s_null = 0;
        long long t = 0, l = 0;
        Py_ssize_t ne = 0, nw = 0;
        if (rows == UINT32_MAX - 1) goto refuse;         /* the stamps would wrap */
        uint32_t mark = (uint32_t)rows + 1;
        for (;;) {
            jl_ws(&c);
            if (c.end - c.p < 3 || c.p[0] != '"' || c.p[2] != '"') goto refuse;
            int key;
            switch (c.p[1]) {
                case 't': key = JL_T; break;
                case 'l': key = JL_L; break;
                case 'e': key = JL_E; break;
                case 's': key = JL_S; break;
                default: goto refuse;
            }
            if (seen & key) goto refuse;                 /* a repeated key: the reader's rule */
            seen |= key;
            c.p += 3;
            jl_ws(&c);
            if (c.p >= c.end || *c.p++ != ':') goto refuse;
            jl_ws(&c);
            if (key == JL_T) {
                if (jl_uint(&c, 1LL << 32, &t) < 0) goto refuse;
            } else if (key == JL_L) {
                if (jl_uint(&c, JL_MAX_LAYER, &l) < 0) goto refuse;
            } else if (key == JL_S && c.p < c.end && *c.p == 'n') {
                if (jl_lit(&c, "null", 4) < 0) goto refuse;
                s_null = 1;
            } else {
                if (c.p >= c.end || *c.p++ != '[') goto refuse;
                jl_ws(&c);
                Py_ssize_t n = 0;
                if (c.p < c.end && *c.p == ']') goto refuse;  /* an empty list */
                for (;;) {
                    if (n == cap) {
                        Py_ssize_t nc = cap ? cap * 2 : 64;
                        if (nc > JL_MAX_ID) nc = JL_MAX_ID;
                        if (n == nc) goto refuse;        /* more ids than any expert count */
                        int32_t *ne2 = realloc(row_e, (size_t)nc * sizeof(int32_t));
                        if (!ne2) { PyErr_NoMemory(); goto done; }
                        row_e = ne2;
                        double *nw2 = realloc(row_w, (size_t)nc * sizeof(double));
                        if (!nw2) { PyErr_NoMemory(); goto done; }
                        row_w = nw2;
                        cap = nc;
                    }
                    if (key == JL_E) {
                        long long id;
                        if (jl_uint(&c, JL_MAX_ID, &id) < 0) goto refuse;
                        if (stamp[id] == mark) goto refuse;      /* a repeated id */
                        stamp[id] = mark;
                        row_e[n++] = (int32_t)id;
                    } else {
                        double w;
                        if (jl_number(&c, &w) < 0) goto refuse;
                        row_w[n++] = w;
                    }
                    jl_ws(&c);
                    if (c.p >= c.end) goto refuse;
                    if (*c.p == ']') { c.p++; break; }
                    if (*c.p++ != ',') goto refuse;
                    jl_ws(&c);
                }
                if (key == JL_E) ne = n; else nw = n;
            }
            jl_ws(&c);
            if (c.p >= c.end) goto refuse;
            if (*c.p == '}') { c.p++; break; }
            if (*c.p++ != ',') goto refuse;
        }
        jl_ws(&c);
        if (c.p != c.end) goto refuse;                   /* anything after the object */
        if ((seen & (JL_T | JL_L | JL_E)) != (JL_T | JL_L | JL_E)) goto refuse;
        int has_s = (seen & JL_S) && !s_null;
        if (has_s && nw != ne) goto refuse;
        if (k < 0) { k = ne; with_s = has_s; }
        else if (ne != k || has_s != with_s) goto refuse;
        int32_t lv = (int32_t)l;
        int64_t sv = (int64_t)t;
        if (gb_put(&bl, &lv, 4) < 0 || gb_put(&bs, &sv, 8) < 0 ||
                gb_put(&be, row_e, ne * (Py_ssize_t)sizeof(int32_t)) < 0 ||
                (has_s && gb_put(&bw, row_w, nw * (Py_ssize_t)sizeof(double)) < 0)) goto done;
        rows++;
    }
    if (rows == 0) goto refuse;
    {
        PyObject *w = with_s ? gb_bytes(&bw) : (Py_INCREF(Py_None), Py_None);
        result = Py_BuildValue("(NNNNn)", gb_bytes(&bl), gb_bytes(&be), w, gb_bytes(&bs), k);
    }
    goto done;
refuse:
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&view);
    free(bl.p); free(be.p); free(bw.p); free(bs.p);
    free(stamp); free(row_e); free(row_w);
    return result;
}

static PyMethodDef jsonl_methods[] = {
    {"jsonl_rows", jsonl_jsonl_rows, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int jsonl_init_module(PyObject *m) {
    jsonl_methods[0].ml_doc = "jsonl_rows(data, start, max_line): a JSONL trace's rows as columns (None: not taken)";
    return PyModule_AddFunctions(m, jsonl_methods);
}
