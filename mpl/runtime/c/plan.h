/* One dispatch's decisions as the engine records them in C (no Python object): what a
 * replay's timeline reads, and what becomes an mpl.runtime.plan.Plan when a caller wants one.
 *
 * The fields mirror Plan's: per access (the dispatch's distinct experts in router order) its
 * place and whether it hit; the loads in issue order; every eviction in order. Keys are
 * layer * E + expert (the engine's keys, engine.h: with memory tiers that split experts into
 * parts, (layer * E + expert) * S + part; the C timeline plays records of untiered policies
 * only). The engine owns the arrays (grown before a dispatch changes any state, so recording
 * never fails halfway).
 */
#ifndef MPL_PLAN_H
#define MPL_PLAN_H

#include <stddef.h>
#include <stdint.h>

enum { PK_DEMAND = 0, PK_BACKGROUND = 1, PK_PREFETCH = 2 };   /* Load.kind */
enum { W_CPU = -1, W_STREAM = -2, W_LOWER = -3, W_PARTS = -4 };   /* Plan.where besides a slot (W_PARTS: a tuple, per part its place) */
/* Step.op (memory tiers: mpl.runtime.plan) */
enum { SO_READ = 0, SO_PROMOTE, SO_DEMOTE, SO_REQUANT, SO_SERVE, SO_LEAVE, SO_COUNT };

typedef struct { int key, slot, victim; int kind; } PlanLoad;  /* victim -1: None */
typedef struct { int key, slot; } PlanEvict;
/* one move between memory tiers (mpl.runtime.plan.Step): tiers are indices in the key's set
 * of tiers; victim -1: None; dtype: an index into the engine's tier dtype names (-1: None);
 * kind: a PK_* (-1: None) */
typedef struct { int op, key, source, target, slot, victim, dtype, kind; } PlanStep;

typedef struct {
    int64_t step;
    long layer;
    long E;                   /* experts per layer (a key's expert is key % E) */
    long n;                   /* accesses */
    const long *experts;      /* n expert ids, router order */
    const long *where;        /* n: a slot >= 0, W_CPU or W_STREAM */
    const unsigned char *hit; /* n: resident when the dispatch started */
    const PlanLoad *loads;
    long nloads;
    const PlanEvict *evicted;
    long nevicted;
} PlanRec;

#endif
