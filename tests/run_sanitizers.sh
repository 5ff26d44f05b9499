#!/usr/bin/env bash
# The compiled engine under AddressSanitizer + UndefinedBehaviorSanitizer: builds
# mpl.runtime._engine with -fsanitize=address,undefined and -fno-wrapv in a copy of the
# checkout, proves that signed overflow is reported (the build must not inherit CPython's
# -fwrapv, which makes it defined and invisible), then runs the engine's tests there: the
# stores, timeline, predictor and budget split against their Python twins, the two backends
# call by call, threads and callbacks, replays, Belady, packing and trace reading. Any
# sanitizer report stops the run with a non-zero exit (halt_on_error); a test failure fails
# it too.
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
    # -fno-wrapv last on every compile line (CFLAGS follow the interpreter's own flags, which
    # may hold -fwrapv): signed overflow stays undefined, so UBSan reports it
    flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1 -fno-wrapv"
    log=$(CC="$CC" CFLAGS="$flags" LDFLAGS="-fsanitize=address,undefined" \
        "$PY" setup.py build_ext --inplace --force 2>&1) || { echo "$log" >&2; exit 1; }
    so=$(ls mpl/runtime/_engine*.so 2>/dev/null | head -n 1)
    test -n "$so" || { echo "sanitizers: the extension was not built" >&2; echo "$log" >&2; exit 1; }
    # every compile line ends its wrap flags with -fno-wrapv
    bad=$(printf '%s\n' "$log" | grep -E '^(gcc|cc|clang|x86_64|aarch64).* -c ' | grep -Ev -- '-fno-wrapv' || true)
    if [ -n "$bad" ]; then echo "sanitizers: a compile line without -fno-wrapv:" >&2; echo "$bad" >&2; exit 1; fi
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
"$PY" -c "import mpl.runtime.compiled as c, sys; sys.exit(0 if c.engine is not None else 'sanitizers: the instrumented engine does not load: ' + str(c.WHY))"
# signed overflow is reported (-fno-wrapv in effect): the probe must die with UBSan's report
probe=$("$PY" -c "import mpl.runtime._engine as e; e._wrap_probe(2**63 - 1, 1)" 2>&1) && {
    echo "sanitizers: a signed overflow went unreported (is -fwrapv in effect?)" >&2; exit 1; }
case "$probe" in *"signed integer overflow"*) ;; *)
    echo "sanitizers: the overflow probe failed without UBSan's report:" >&2; echo "$probe" >&2; exit 1 ;; esac
# --capture=sys: a sanitizer writes its report to the process's stderr, which pytest's default
# (file-descriptor) capture would swallow with the process it aborts
"$PY" -m pytest -q -p no:cacheprovider -o addopts="" --capture=sys \
    tests/test_runtime_backends.py tests/test_runtime_threads.py tests/test_store_backends.py \
    tests/test_timeline_backends.py tests/test_budget_backends.py tests/test_learned_backends.py \
    tests/test_sim_replay.py tests/test_belady.py tests/test_runtime_equivalence.py \
    tests/test_prefetch_learned.py tests/test_trace_columns.py tests/test_trace_wide_headers.py \
    tests/test_trace_jsonl_columns.py tests/test_predictor_report_engine.py \
    tests/test_tiers_backends.py tests/test_runtime_tiers.py "$@"
