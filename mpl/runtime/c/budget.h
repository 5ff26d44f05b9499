/* The per-layer budget split in C: mpl.runtime.budgets.allocate transcribed (the same
 * water-filling, the same float operations in the same order, math.fsum's exactly rounded
 * sums, sum()'s additions as the running CPython makes them), so both backends give the same
 * capacities for the same weights, or the same error. Nothing here runs Python code but
 * budget_set_error (which sets an exception) and the test-only _allocate. */
#ifndef MPL_BUDGET_H
#define MPL_BUDGET_H

#include <Python.h>

/* what budget_allocate and budget_fsum return */
enum {
    BUDGET_OK = 0,
    BUDGET_BELOW_MIN = -1,     /* lo * n > budget: Python's BudgetError */
    BUDGET_NOMEM = -2,         /* out of memory */
    BUDGET_RANGE = -3,         /* n > BUDGET_LAYERS_MAX or |budget|, |lo|, |hi| > BUDGET_VALUE_MAX:
                                * beyond what the C split holds exactly (never for the schema's
                                * values: total_budget <= 2^22, capacities <= 65536) */
    BUDGET_NAN_SHARE = -4,     /* a share is NaN (an infinite weight): Python's ValueError
                                * "cannot convert float NaN to integer" */
    BUDGET_INF_SHARE = -5,     /* a share is infinite (a weight of ~1e308): OverflowError
                                * "cannot convert float infinity to integer" */
    BUDGET_FSUM_OVERFLOW = -6, /* OverflowError "intermediate overflow in fsum" */
    BUDGET_FSUM_INF_NAN = -7,  /* ValueError "-inf + inf in fsum" (budget_fsum only) */
};

#define BUDGET_LAYERS_MAX (1L << 22)
#define BUDGET_VALUE_MAX (1LL << 30)

/* allocate(weights, budget, lo, hi) for n >= 0 layers into out[n] (w: n doubles, any values:
 * max(0.0, x) is taken as Python takes it): BUDGET_OK, or one of the codes above, the checks
 * in Python's order (BUDGET_RANGE first). No exception is set; budget_set_error words one. */
int budget_allocate(const double *w, long n, long long budget, long long lo, long long hi,
                    long long *out);

/* math.fsum of n doubles (CPython's algorithm: exactly rounded) into *out: BUDGET_OK,
 * BUDGET_NOMEM, BUDGET_FSUM_OVERFLOW or BUDGET_FSUM_INF_NAN. No exception is set. */
int budget_fsum(const double *x, long n, double *out);

/* Set the Python exception of a code (for BUDGET_BELOW_MIN, mpl.runtime.budgets.BudgetError
 * with allocate's message, from the arguments given); returns -1. */
int budget_set_error(int code, long long budget, long n, long long lo);

int budget_init_module(PyObject *m);

#endif
