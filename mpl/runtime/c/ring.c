/* The per-layer windows of rows (ring.h). */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ring.h"

static int ring_alloc(Ring *r, long L, long W, long R) {
    memset(r, 0, sizeof *r);
    r->L = L;
    r->W = W;
    r->R = R;
    if (L < 1 || R < 1 || (size_t)R > SIZE_MAX / sizeof(int *) / (size_t)L) return -1;
    r->head = calloc((size_t)L, sizeof(long));
    r->len = calloc((size_t)L, sizeof(long));
    r->rows = calloc((size_t)L * (size_t)R, sizeof(int *));
    r->rown = calloc((size_t)L * (size_t)R, sizeof(int));
    r->rowcap = calloc((size_t)L * (size_t)R, sizeof(int));
    if (!r->head || !r->len || !r->rows || !r->rown || !r->rowcap) return -1;
    return 0;
}

void ring_free(Ring *r) {
    if (r->rows)
        for (long i = 0; i < r->L * r->R; i++) free(r->rows[i]);
    free(r->rows); free(r->rown); free(r->rowcap); free(r->head); free(r->len);
    memset(r, 0, sizeof *r);
}

int ring_init(Ring *r, long L, long W) {
    long cap = W < LONG_MAX ? W + 1 : LONG_MAX;
    long R = cap < 8 ? cap : 8;
    if (ring_alloc(r, L, W, R) < 0) { ring_free(r); return -1; }
    return 0;
}

/* twice the room (at most W + 1, or one more row: a window an adapt action shortened keeps
 * its rows until its next push), every layer's rows moved to the front in order */
static int ring_grow(Ring *r) {
    if (r->R == LONG_MAX) return -1;
    long cap = r->W < LONG_MAX ? r->W + 1 : LONG_MAX;
    if (cap <= r->R) cap = r->R + 1;
    long nr = r->R > cap / 2 ? cap : 2 * r->R;
    Ring g;
    if (ring_alloc(&g, r->L, r->W, nr) < 0) { ring_free(&g); return -1; }
    for (long l = 0; l < r->L; l++) {
        for (long j = 0; j < r->len[l]; j++) {
            long oi = ring_at(r, l, j), ni = l * nr + j;
            g.rows[ni] = r->rows[oi]; g.rown[ni] = r->rown[oi]; g.rowcap[ni] = r->rowcap[oi];
            r->rows[oi] = NULL;
        }
        g.len[l] = r->len[l];
    }
    ring_free(r);       /* the rows not in use (none moved) */
    *r = g;
    return 0;
}

int ring_reserve(Ring *r, long layer, long n) {
    if (r->len[layer] == r->R && ring_grow(r) < 0) return -1;
    long ri = ring_at(r, layer, r->len[layer]);
    if (r->rowcap[ri] < n) {
        if (n > INT_MAX || (size_t)n > SIZE_MAX / sizeof(int)) return -1;
        int *p = realloc(r->rows[ri], sizeof(int) * (size_t)(n ? n : 1));
        if (!p) return -1;
        r->rows[ri] = p;
        r->rowcap[ri] = (int)n;
    }
    return 0;
}

void ring_push(Ring *r, long layer, const long *ex, long n) {
    long ri = ring_at(r, layer, r->len[layer]);
    for (long j = 0; j < n; j++) r->rows[ri][j] = (int)ex[j];
    r->rown[ri] = (int)n;
    r->len[layer]++;
}

long ring_pop(Ring *r, long layer) {
    long oi = layer * r->R + r->head[layer];
    r->head[layer] = (r->head[layer] + 1) % r->R;
    r->len[layer]--;
    return oi;
}
