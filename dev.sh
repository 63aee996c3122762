#!/usr/bin/env bash
# Set up (or reuse) the project's virtual environment, then run one job.
#   bash dev.sh demo   - the embedded federated demo (main job)
#   bash dev.sh test   - lint, type check and the whole test suite
#   bash dev.sh quick  - lint, type check and the tests not marked slow, SQLite only
#   bash dev.sh bench  - the benchmarks
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
VENV=${SECFPP_VENV:-.venv}
STAMP="$VENV/.secfpp-installed"
want=$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)

if [ ! -x "$VENV/bin/python" ]; then
    echo "== creating virtual environment $VENV"
    "$PY" -m venv "$VENV"
fi
if [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
    echo "== installing dependencies (versions from constraints.txt; first time takes a few minutes)"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    # torch first and alone: pip then takes the pinned pair without resolving anything else
    "$VENV/bin/python" -m pip install --quiet -c constraints.txt torch torchvision
    "$VENV/bin/python" -m pip install --quiet -c constraints.txt -e ".[dev]"
    echo "$want" > "$STAMP"
fi
# Offline data the three-domain setting needs: Debian's dataset-fashion-mnist. As root it is
# installed system-wide; without root the .deb is unpacked into the venv (no-root fallback).
fashion_local="$(cd "$VENV" && pwd)/share/fashion-mnist"
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] \
    && [ -z "${SECFPP_FASHION_MNIST_DIR:-}" ]; then
    if [ ! -f "$fashion_local/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz" ]; then
        echo "== installing Fashion-MNIST (Debian package dataset-fashion-mnist)"
        if [ "$(id -u)" = 0 ]; then
            (apt-get install -y -q dataset-fashion-mnist >/dev/null 2>&1 \
                || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q dataset-fashion-mnist >/dev/null 2>&1; }) \
                || echo "warning: apt-get install dataset-fashion-mnist failed" >&2
        fi
        if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
            tmp=$(mktemp -d)
            (cd "$tmp" && apt-get download dataset-fashion-mnist >/dev/null 2>&1 \
                && dpkg -x dataset-fashion-mnist_*.deb "$fashion_local") \
                || echo "warning: could not fetch dataset-fashion-mnist; the three-domain setting will say how to install it" >&2
            rm -rf "$tmp"
        fi
    fi
    if [ -f "$fashion_local/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz" ]; then
        export SECFPP_FASHION_MNIST_DIR="$fashion_local"
    fi
fi
# Headless Chromium for the dashboard's browser tests (tests/dashboard), Debian's package
# driven by Playwright: installed with apt-get as root; without root, say what to install.
if [ "${1:-}" = test ] && ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        echo "== installing headless Chromium (Debian package chromium) for the dashboard tests"
        (apt-get install -y -q chromium >/dev/null 2>&1 \
            || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1; }) \
            || echo "warning: apt-get install chromium failed" >&2
    fi
    command -v chromium >/dev/null 2>&1 \
        || echo "warning: no chromium: the dashboard's browser tests skip (and fail under CI=true); install it with: sudo apt-get install -y chromium" >&2
fi
# buildah + debootstrap for the container-image tests (tests/docker/test_images_round.py:
# docker/build.sh builds both images without a Docker engine, then one round runs through
# them): installed with apt-get as root; without root, say what to install.
if [ "${1:-}" = test ] && { ! command -v buildah >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; }; then
    if [ "$(id -u)" = 0 ]; then
        echo "== installing buildah and debootstrap (Debian packages) for the container-image tests"
        (apt-get install -y -q buildah debootstrap >/dev/null 2>&1 \
            || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q buildah debootstrap >/dev/null 2>&1; }) \
            || echo "warning: apt-get install buildah debootstrap failed" >&2
    fi
    { command -v buildah >/dev/null 2>&1 && command -v debootstrap >/dev/null 2>&1; } \
        || echo "warning: no buildah/debootstrap: the container-image tests skip (and fail under CI=true); as root: apt-get install -y buildah debootstrap" >&2
fi
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1} OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} MKL_NUM_THREADS=${MKL_NUM_THREADS:-1}
job=${1:-}
shift || true
# Test workers (test and quick): one xdist worker per core and one more (each worker has its
# own databases): the process, socket and fault tests spend part of their time waiting, and
# with only one worker per core the 2-core machine sat a quarter idle (3 workers: 7.6 min,
# 2: 8.2). At most 8 (PostgreSQL's default 100 connections). SECFPP_TEST_WORKERS=N sets it,
# 0 runs in one process. (nproc honours OMP_NUM_THREADS, set to 1 above: count the cores
# without it.)
workers=$(( $(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) + 1 ))
(( workers > 8 )) && workers=8
if [ "$job" = test ] || [ "$job" = quick ]; then
    # Bytecode is cached for the test jobs even where the environment turns it off
    # (PYTHONDONTWRITEBYTECODE): the suite starts many Python processes
    # (coordinators, daemons, CLIs), each of which otherwise compiles the project's modules
    # again, and pytest rewrites every test module again in every worker. The caches are the
    # usual __pycache__ folders, which git and the image builds ignore.
    unset PYTHONDONTWRITEBYTECODE
fi
# mypy's cache lives in the user's cache folder, not in the clone: a fresh clone of code
# this machine has checked before then takes under a second instead of half a CPU-minute.
# mypy rechecks every module whose source hash differs from the cached one (and what
# depends on it), so a cache shared by clones and commits gives the same verdict as none.
# SECFPP_MYPY_CACHE sets the folder.
MYPY=("$VENV/bin/mypy" --cache-dir "${SECFPP_MYPY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/secfpp/mypy}")
case "$job" in
    test)
        "$VENV/bin/ruff" check .
        # mypy runs beside the tests, not before them: without a cache it takes about half a
        # CPU-minute, which the tests' waits (processes, sockets, faults) absorb. Its report
        # is printed after theirs; either failing fails the job.
        mypy_log=$(mktemp)
        "${MYPY[@]}" >"$mypy_log" 2>&1 &
        mypy_pid=$!
        # Slow tests are handed out first, one at a time (loadgroup; tests/conftest.py
        # orders them), so no long test starts last; an xdist_group (a module whose
        # expensive fixture its tests share) stays on one worker. The 25 slowest tests are
        # listed at the end.
        export SECFPP_DEFAULT_WORKERS=$workers  # tests/test_suite_layout.py checks it
        status=0
        "$VENV/bin/python" -m pytest -n "${SECFPP_TEST_WORKERS:-$workers}" --dist loadgroup \
            --durations=25 "$@" || status=$?
        mypy_status=0
        wait "$mypy_pid" || mypy_status=$?
        echo "== mypy"
        cat "$mypy_log"
        rm -f "$mypy_log"
        if (( mypy_status != 0 )); then
            echo "mypy failed (exit $mypy_status)" >&2
            (( status != 0 )) || status=$mypy_status
        fi
        exit "$status"
        ;;
    quick)
        # The inner loop: lint, types and every test not marked slow, on SQLite only.
        "$VENV/bin/ruff" check .
        "${MYPY[@]}"
        "$VENV/bin/python" -m pytest -n "${SECFPP_TEST_WORKERS:-$workers}" --dist loadgroup \
            -m "not slow and not postgres" -q --durations=10 "$@"
        ;;
    demo)
        "$VENV/bin/python" -m demo "$@"
        ;;
    bench)
        "$VENV/bin/python" -m bench.crypto.round "$@"
        ;;
    *)
        echo "usage: bash dev.sh {demo|test|quick|bench} [args...]" >&2
        exit 2
        ;;
esac
