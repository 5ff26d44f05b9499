/* The simulated timeline of a replay in C: mpl.timemodel.timeline.Timeline transcribed (the
 * same floating-point operations in the same order; the extension is compiled with
 * -ffp-contract=off), so a compiled replay gives the pure replay's clocks bit for bit.
 *
 * The replay loop (engine) reads a Python Timeline into a TL once (tl_load), plays each
 * dispatch's PlanRec on it (tl_play), and writes the clocks, counters and the map of transfers
 * in flight back into the Python object before any Python code could read them (a tick
 * callback) and at the end, on an error too (tl_store). A timeline the C side cannot hold
 * exactly (a subclass, clocks that are not floats, costs of another type, ...) is left to its
 * Python dispatch() (tl_load returns 1).
 */
#ifndef MPL_TIMELINE_H
#define MPL_TIMELINE_H

#include <Python.h>
#include <stdint.h>
#include "plan.h"

typedef struct TL TL;

/* A TL for a replay over keys [0, K) (layer * E + expert): 0 and *out, 1 when the timeline is
 * not one the C side holds (nothing allocated), -1 with a Python exception set. */
int tl_load(TL **out, PyObject *timeline, long K);

/* Play one dispatch: its stall in ms (>= 0). tokens: the record's token count; tokens_of:
 * per access (PlanRec order) the tokens routed to that expert, or NULL for one each (the
 * Python tokens_of None). Never fails (no allocation beyond what tl_load made). */
double tl_play(TL *T, const PlanRec *p, int64_t tokens, const int64_t *tokens_of);

/* Write the state back into the Python Timeline it was loaded from: 0, -1 with an exception. */
int tl_store(TL *T);

void tl_free(TL *T);

#endif
