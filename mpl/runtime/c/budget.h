/* The per-layer budget split in C: mpl.runtime.budgets.allocate transcribed (the same
 * water-filling, the same float operations in the same order, math.fsum's exactly rounded
 * sums), so both backends give the same capacities for the same weights. */
#ifndef MPL_BUDGET_H
#define MPL_BUDGET_H

#include <Python.h>

/* allocate(weights, budget, lo, hi) for n >= 1 layers into out[n]: 0; -1 when lo * n >
 * budget (BudgetError in Python: no exception is set here, the caller words it); -2 out of
 * memory (no exception set). */
int budget_allocate(const double *w, long n, long long budget, long long lo, long long hi,
                    long long *out);

/* math.fsum of n doubles (CPython's algorithm: exactly rounded). */
double budget_fsum(const double *x, long n);

int budget_init_module(PyObject *m);

#endif
