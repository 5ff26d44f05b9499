/* Buffers shared by the compiled helpers (pack.c, belady.c, jsonl.c): a Python buffer held
 * for a call, and a growable byte buffer. */
#ifndef MPL_BUFFERS_H
#define MPL_BUFFERS_H

#include <Python.h>
#include <stdlib.h>
#include <string.h>

typedef struct { Py_buffer b; int held; } Buf;

/* o's buffer of items of itemsize bytes, at least min_len of them (None: nothing held) */
static inline int get_buf(PyObject *o, Buf *x, Py_ssize_t itemsize, Py_ssize_t min_len, const char *what) {
    x->held = 0;
    if (o == Py_None) return 0;
    if (PyObject_GetBuffer(o, &x->b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    x->held = 1;
    if (x->b.itemsize != itemsize || x->b.len / itemsize < min_len) {
        PyErr_Format(PyExc_ValueError, "%s has items of %zd bytes and %zd items (need %zd-byte "
                     "items, at least %zd)", what, x->b.itemsize,
                     x->b.len / (x->b.itemsize ? x->b.itemsize : 1), itemsize, min_len);
        return -1;
    }
    return 0;
}

static inline void rel_buf(Buf *x) { if (x->held) PyBuffer_Release(&x->b); x->held = 0; }

/* get_buf for a buffer the call cannot do without (None: TypeError naming it) */
static inline int get_req_buf(PyObject *o, Buf *x, Py_ssize_t itemsize, Py_ssize_t min_len, const char *what) {
    x->held = 0;
    if (o == Py_None) {
        PyErr_Format(PyExc_TypeError, "%s must be a buffer, not None", what);
        return -1;
    }
    return get_buf(o, x, itemsize, min_len, what);
}

typedef struct { char *p; Py_ssize_t n, cap; } GrowBuf;

static inline int gb_put(GrowBuf *b, const void *x, Py_ssize_t size) {
    if (b->n + size > b->cap) {
        Py_ssize_t nc = b->cap ? b->cap : 4096;
        while (nc < b->n + size) {
            if (nc > PY_SSIZE_T_MAX / 2) { PyErr_NoMemory(); return -1; }
            nc *= 2;
        }
        char *np = realloc(b->p, (size_t)nc);
        if (!np) { PyErr_NoMemory(); return -1; }
        b->p = np; b->cap = nc;
    }
    memcpy(b->p + b->n, x, (size_t)size);
    b->n += size;
    return 0;
}

static inline PyObject *gb_bytes(GrowBuf *b) { return PyBytes_FromStringAndSize(b->p ? b->p : "", b->n); }

#endif
