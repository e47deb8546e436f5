#!/usr/bin/env bash
# The Python packages a lent accelerator's image lacks, carried as wheels (docs/training.md,
# "The accelerator window"). Its image has JAX, optax, orbax, chex, pyarrow, numpy, absl-py
# and tabulate, but not dm-haiku (and its jmp), python-chess or zstandard; it has no network.
#
#   tools/gpu_wheels.sh download [DIR]   # here: the wheels for the device's Python 3.12, x86-64
#   tools/gpu_wheels.sh install [DIR]    # there: installs them offline, then imports them
#
# DIR defaults to gpu-carry/wheels (git-ignored; the device call carries gpu-carry). The
# versions are constraints.txt's.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
dir=${2:-gpu-carry/wheels}
packages=(dm-haiku jmp chess zstandard)

pin() {  # the version constraints.txt pins for a package
    local line
    line=$(grep -i "^$1==" constraints.txt) || { echo "error: constraints.txt pins no $1" >&2; exit 1; }
    echo "${line#*==}"
}

case "$mode" in
download)
    python=${PYTHON:-.venv/bin/python}
    [ -x "$python" ] || python=python3
    rm -rf "$dir" && mkdir -p "$dir"
    binary=()
    for name in dm-haiku jmp zstandard; do binary+=("$name==$(pin "$name")"); done
    # The device's python3 is CPython 3.12 on x86-64 (glibc manylinux wheels).
    "$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d "$dir" "${binary[@]}"
    # python-chess is published as a source archive only: built here into its pure-Python
    # wheel (py3-none-any), which any Python 3 installs.
    "$python" -m pip wheel -q --no-deps -w "$dir" "chess==$(pin chess)"
    du -sh "$dir" && ls "$dir"
    ;;
install)
    ls "$dir"/*.whl >/dev/null 2>&1 || { echo "error: no wheels in $dir (carry gpu-carry)" >&2; exit 1; }
    # --no-deps: their dependencies are the image's own (numpy, absl-py, tabulate), which
    # must not be replaced; --no-index: nothing to reach there.
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --find-links "$dir" "${packages[@]}"
    python3 -c "import haiku, jmp, chess, zstandard; print('wheels installed: haiku', haiku.__version__, 'chess', chess.__version__)"
    ;;
*)
    echo "usage: tools/gpu_wheels.sh download|install [DIR]" >&2
    exit 2
    ;;
esac
