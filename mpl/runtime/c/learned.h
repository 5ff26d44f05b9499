/* The learned next-layer predictor in C (mpl.runtime.prefetch.Learned's twin): the Python type
 * _engine.Learned, and the calls the engine makes on the predictor it holds. None of them runs
 * Python code; each checks what it is given before it changes anything, and none allocates a
 * Python object, so a call is atomic for the other threads (they hold the GIL; nothing in here
 * lets it go) and no finalizer can run in the middle of it.
 *
 * Lifetime and threads (for the engine): a Learned is a Python object, possibly shared (the
 * runtime exposes it, a caller may keep a reference and call its methods from any thread). The
 * engine holds a strong reference for as long as it uses it, calls these functions with the
 * GIL held, and copies what lrn_predict returns before it runs any Python code or lets the GIL
 * go (another thread's predict reuses the buffer). Nothing else is shared: the state is the
 * object's, read and written only through these calls and the type's own methods.
 */
#ifndef MPL_LEARNED_H
#define MPL_LEARNED_H

#include <Python.h>
#include <stdint.h>

typedef struct Learned Learned;
extern PyTypeObject LearnedType;

#define LRN_STEP_MAX (1LL << 62)   /* |step| and d beyond this are a caller's error */
#define LRN_MAX_KEYS (1L << 22)    /* layers x experts, and distances x layers x experts rows:
                                    * a larger shape is refused (ValueError) */

/* One speculative prediction a dispatch was given: target layer t, in step st (what
 * Learned.observe gives it: step if t > layer, else step + 1), its n ids. */
typedef struct { long t; int64_t st; long n; const long *ids; } GateArg;

/* Learned.observe(layer, step, experts, weights, predictions): the n distinct experts of layer
 * (ids in [0, E), 0 <= n <= E), their router weights w (NULL: none), the gates (distinct
 * layers in [0, L), st as above; ids in [0, E), repeats allowed: the first of each is kept).
 * 0, or -1 with a Python exception: ValueError for a bad argument (nothing changed),
 * MemoryError (nothing changed). */
int lrn_observe(Learned *o, long layer, int64_t step, const long *ex, long n, const double *w,
                const GateArg *gates, long ng);

/* Learned.predict(layer, step, d): the number of candidates at or above the confidence, most
 * probable first (ties: the lower id), their ids in *ids (valid until the next call on o);
 * -1 with a Python exception: ValueError (layer out of range, |step| or d beyond LRN_STEP_MAX,
 * or the target's step beyond LRN_STEP_MAX + 1: the next pass of the last step), MemoryError;
 * then nothing changed. */
long lrn_predict(Learned *o, long layer, int64_t step, int64_t d, long top, const int **ids);

/* window (prefetch.history_window: values below 1 are 1) and confidence
 * (prefetch.confidence), as adapt sets them */
void lrn_set_window(Learned *o, long window);
void lrn_set_confidence(Learned *o, double confidence);

/* the shape it was made for */
long lrn_layers(const Learned *o);
long lrn_experts(const Learned *o);

int learned_init_module(PyObject *m);

#endif
