/* The learned next-layer predictor in C (mpl.runtime.prefetch.Learned's twin): the Python type
 * _engine.Learned, and the two calls the engine makes on the predictor it owns. Neither runs
 * Python code; both check what they are given. */
#ifndef MPL_LEARNED_H
#define MPL_LEARNED_H

#include <Python.h>
#include <stdint.h>

typedef struct Learned Learned;
extern PyTypeObject LearnedType;

#define LRN_STEP_MAX (1LL << 62)   /* |step| beyond this is a caller's error */

/* One speculative prediction a dispatch was given: target layer t, in step st, its ids. */
typedef struct { long t; int64_t st; long n; const long *ids; } GateArg;

/* Learned.observe(layer, step, experts, weights, predictions): n distinct experts of layer
 * (ids in range, n <= E), their router weights w (NULL: none), the gates (distinct layers in
 * range; ids in range, repeats allowed). 0, or -1 with a Python exception (MemoryError). */
int lrn_observe(Learned *o, long layer, int64_t step, const long *ex, long n, const double *w,
                const GateArg *gates, long ng);

/* Learned.predict(layer, step, d): the number of candidates at or above the confidence, most
 * probable first (ties: the lower id), their ids in *ids (valid until the next call on o);
 * -1 with a Python exception. */
long lrn_predict(Learned *o, long layer, int64_t step, int64_t d, const int **ids);

/* window (prefetch.history_window) and confidence (prefetch.confidence), as adapt sets them */
void lrn_set_window(Learned *o, long window);
void lrn_set_confidence(Learned *o, double confidence);

/* the shape it was made for */
long lrn_layers(const Learned *o);
long lrn_experts(const Learned *o);

int learned_init_module(PyObject *m);

#endif
