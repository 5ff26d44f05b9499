#!/usr/bin/env bash
# The compiled core under AddressSanitizer + UndefinedBehaviorSanitizer: builds
# mpl.runtime._fast with -fsanitize=address,undefined in a copy of the checkout and runs the
# kernel, live-dispatch (learned policies too), Belady, learned-predictor, trace-packing and
# callback/thread-safety tests there. Any sanitizer report stops the run with a non-zero
# exit (halt_on_error); a test failure fails it too.
#   bash tests/run_sanitizers.sh              # the default test set
#   bash tests/run_sanitizers.sh -k threads   # extra pytest arguments
# Needs gcc with libasan/libubsan (Debian's gcc has both). Python itself is not
# instrumented: ASan is preloaded, and PYTHONMALLOC=malloc routes Python's allocations
# through it, so a use of a freed object or buffer from C is reported too.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
CC=${CC:-gcc}

asan=$("$CC" -print-file-name=libasan.so)
ubsan=$("$CC" -print-file-name=libubsan.so)
if [ ! -e "$asan" ] || [ ! -e "$ubsan" ]; then
    echo "sanitizers: $CC has no libasan/libubsan ($asan, $ubsan)" >&2
    exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/mpl-sanitizers.XXXXXX")
trap 'rm -rf "$work"' EXIT
# the tracked files (and new ones not ignored): what a fresh clone has
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$work"
(
    cd "$work"
    flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1"
    CC="$CC" CFLAGS="$flags" LDFLAGS="-fsanitize=address,undefined" \
        "$PY" setup.py -q build_ext --inplace --force >/dev/null 2>&1
    so=$(ls mpl/runtime/_fast*.so 2>/dev/null | head -n 1)
    test -n "$so" || { echo "sanitizers: the extension was not built" >&2; exit 1; }
    # (ldd's output read whole first: `ldd | grep -q` under pipefail fails when grep's early
    # exit hands ldd a SIGPIPE)
    deps=$(ldd "$so")
    case "$deps" in *libasan*) ;; *) echo "sanitizers: $so is not instrumented" >&2; exit 1 ;; esac
)

export LD_PRELOAD="$asan:$ubsan"
export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export PYTHONMALLOC=malloc
export PYTHONPATH="$work${PYTHONPATH:+:$PYTHONPATH}"
cd "$work"
"$PY" -c "import mpl.runtime.fast as f, sys; sys.exit(0 if f._kernel is not None else 'sanitizers: the instrumented kernel does not load: ' + str(f._WHY))"
"$PY" -m pytest -q -p no:cacheprovider -o addopts="" \
    tests/test_live_safety.py tests/test_live_dispatch.py tests/test_fast_equivalence.py \
    tests/test_replay_kernel.py tests/test_belady.py tests/test_runtime_equivalence.py \
    tests/test_prefetch_learned_compiled.py tests/test_prefetch_learned.py tests/test_live_learned.py \
    tests/test_trace_columns.py tests/test_trace_wide_headers.py tests/test_trace_jsonl_columns.py "$@"
