/* The simulated timeline of a replay in C: mpl.timemodel.timeline.Timeline transcribed (the
 * same floating-point operations in the same order; the extension is compiled with
 * -ffp-contract=off), so a compiled replay gives the pure replay's clocks bit for bit.
 *
 * The replay loop (engine) reads a Python Timeline into a TL once (tl_load), plays each
 * dispatch's PlanRec on it (tl_play), and writes the clocks, counters and the map of transfers
 * in flight back into the Python object before any Python code could read them (a tick
 * callback) and at the end, on an error too (tl_store). After Python code that could have
 * changed the timeline ran (a tick callback may call set_clocks, or replace the arrival map),
 * tl_reload reads it again before the next tl_play.
 *
 * A timeline the C side cannot hold exactly is left to its Python dispatch() (tl_load and
 * tl_reload return 1): a subclass of Timeline, or an instance whose dispatch / demand were
 * replaced; Costs or Profile of another type than mpl.timemodel.hardware's own; a clock or a
 * unit cost (_t_xfer, _gpu1, _cpu1, _dense1) that is not a finite float; transfers not an int,
 * bytes not an int or a float; overlap not a bool or an int; expert_bytes not an int in
 * [0, 2^63) or a float; a cost number (expert_flops_per_token, dense_bytes_per_layer and the
 * profile's hbm_gbps, gpu_tflops, cpu_mem_gbps, cpu_gflops, kernel_launch_us) not an int or a
 * float, an int one beyond 64 bits, a divisor (hbm_gbps x 1e9, ...) not finite and > 0, or a
 * per-token memory term not finite; an arrival map that is not a dict of (layer, expert) keys
 * of exact ints in [0, L) x [0, E) to finite floats. (With finite clocks and costs, no clock a
 * play computes is NaN, so the late transfers' sort is the stable sort on a total order that
 * list.sort() gives.)
 *
 * Threads and ownership: a TL belongs to the one replay that loaded it; it holds a strong
 * reference to the Timeline. tl_load, tl_store, tl_reload and tl_free need the GIL (they read
 * or write Python objects); tl_play touches no Python object (it may run with the GIL
 * released, when nothing else uses the TL).
 */
#ifndef MPL_TIMELINE_H
#define MPL_TIMELINE_H

#include <Python.h>
#include <stdint.h>
#include "plan.h"

typedef struct TL TL;

/* The largest key space a TL holds (its per-key arrays are int32-linked). */
#define TL_KEYS_MAX (1L << 30)

/* A TL for a replay over the keys [0, L * E) (layer * E + expert): 0 and *out, 1 when the
 * timeline is not one the C side holds (nothing allocated, no exception), -1 with a Python
 * exception set (MemoryError; ValueError for L, E < 1 or L * E > TL_KEYS_MAX). */
int tl_load(TL **out, PyObject *timeline, long L, long E);

/* Play one dispatch: its stall in ms (what Timeline.dispatch returns). The record must be
 * the engine's own: p->E the E given to tl_load, p->layer in [0, L), 0 <= p->n <= E, experts
 * in [0, E), every load's and eviction's key in [0, L * E). tokens: the record's token count;
 * tokens_of: per access (PlanRec order) the tokens routed to that expert, or NULL for the
 * Python tokens_of None (a dict, even an empty one, is an array: 1 for an expert it does not
 * name). Never fails (no allocation: tl_load made what it needs). */
double tl_play(TL *T, const PlanRec *p, int64_t tokens, const int64_t *tokens_of);

/* Write the state back into the Python Timeline it was loaded from (the clocks, cpu_ms,
 * cpu_wait_ms, transfers and bytes as Python would hold them, and the arrival map: the same
 * keys, values and order as Timeline.dispatch leaves it). T stays valid and equal to the
 * Python state. 0, or -1 with an exception (then the Python object may hold part of it). */
int tl_store(TL *T);

/* Read the Python Timeline again into T (after Python code that may have changed it ran):
 * 0; 1 when it is no longer one the C side holds (T is then unusable but for tl_free; the
 * caller goes on with the Python dispatch()); -1 with an exception. */
int tl_reload(TL *T);

void tl_free(TL *T);

#endif
