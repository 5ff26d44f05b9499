/* Python's builtin sum() of floats, as the running CPython adds them, for the units that
 * transcribe Python code calling sum() on floats (the timeline, the budget split).
 *
 * sum() starts from the int 0: the first float is 0 + x (0.0 + x: -0.0 becomes 0.0), the
 * others are added left to right up to Python 3.11; from 3.12 on they are added with
 * Neumaier's compensation (Python/bltinmodule.c, builtin_sum_impl), and the compensation is
 * added at the end when it is nonzero and finite. The sum of nothing is the int 0 (0.0 here:
 * every caller only compares it or adds it to a float).
 */
#ifndef MPL_PYSUM_H
#define MPL_PYSUM_H

#include <Python.h>
#include <math.h>

typedef struct { double hi, lo; int any; } PySum;

static inline void pysum_init(PySum *s) { s->hi = 0.0; s->lo = 0.0; s->any = 0; }

static inline void pysum_add(PySum *s, double x) {
    if (!s->any) {            /* int 0 + float */
        s->hi = 0.0 + x;
        s->any = 1;
        return;
    }
#if PY_VERSION_HEX >= 0x030C0000
    double t = s->hi + x;
    if (fabs(s->hi) >= fabs(x)) s->lo += (s->hi - t) + x;
    else s->lo += (x - t) + s->hi;
    s->hi = t;
#else
    s->hi += x;
#endif
}

static inline double pysum_value(const PySum *s) {
#if PY_VERSION_HEX >= 0x030C0000
    if (s->lo != 0.0 && isfinite(s->lo)) return s->hi + s->lo;
#endif
    return s->hi;
}

#endif
