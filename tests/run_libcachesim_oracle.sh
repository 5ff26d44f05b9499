#!/usr/bin/env bash
# libCacheSim (a reference C cache simulator) as an independent oracle: installs it without
# its dependencies (numpy is already there; boto3 is for its S3 traces) into its own folder
# (.oracle-libcachesim in the clone, ignored by git; MPL_LIBCACHESIM_DIR overrides) and runs
# the tests that compare our hit counts with it (tests/test_replay_backends.py -k libcachesim).
# * libcachesim cannot be installed (no package index, no room on the disk, ...: pip says
#   why just above): SKIPPED, said on stderr, exit 0
#   (MPL_LIBCACHESIM_REQUIRED=1 makes that a failure).
# * installed, the tests must run: a skip there is a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
DIR=${MPL_LIBCACHESIM_DIR:-.oracle-libcachesim}
SPEC=${MPL_LIBCACHESIM_SPEC:-libcachesim==0.3.5}
PY=${PYTHON:-python}
export PIP_DISABLE_PIP_VERSION_CHECK=1

if ! PYTHONPATH="$DIR" "$PY" -c "import libcachesim" >/dev/null 2>&1; then
    if ! timeout 300 "$PY" -m pip install -q --no-deps --target "$DIR" "$SPEC"; then
        echo "libCacheSim oracle SKIPPED: cannot install $SPEC (pip's error above)" >&2
        [ "${MPL_LIBCACHESIM_REQUIRED:-0}" = "1" ] && exit 1
        exit 0
    fi
fi
MPL_LIBCACHESIM_REQUIRED=1 PYTHONPATH="$DIR${PYTHONPATH:+:$PYTHONPATH}" \
    "$PY" -m pytest tests/test_replay_backends.py -k libcachesim -p no:cacheprovider -o addopts="-q -ra" "$@"
rc=$?
if [ "$rc" -eq 5 ]; then echo "libCacheSim oracle: pytest collected no tests" >&2; rc=1; fi
exit "$rc"
