/* A window of the last W dispatches of each layer (their expert ids), as the pure History
 * and Signal keep it in a deque per layer: per layer a ring of rows with room for R of them.
 * R grows (doubling, up to W + 1) with what the window holds, never with W itself: memory
 * follows the dispatches seen, whatever window a policy names. */
#ifndef MPL_RING_H
#define MPL_RING_H

typedef struct {
    long L, W, R;
    long *head, *len;     /* per layer */
    int **rows;           /* L * R rows (row i of layer l at l * R + i) */
    int *rown, *rowcap;
} Ring;

int ring_init(Ring *r, long L, long W);                 /* 0, -1 out of memory */
void ring_free(Ring *r);
static inline long ring_at(const Ring *r, long layer, long j) {   /* row j, oldest first */
    return layer * r->R + (r->head[layer] + j) % r->R;
}
/* room for one more row of n ids in layer (so that ring_push cannot fail): 0, -1 */
int ring_reserve(Ring *r, long layer, long n);
/* the row ex[0..n) enters layer's window at its end (after ring_reserve) */
void ring_push(Ring *r, long layer, const long *ex, long n);
/* the oldest row of layer leaves: its index (readable until the next push) */
long ring_pop(Ring *r, long layer);

#endif
