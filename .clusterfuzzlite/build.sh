#!/bin/bash
# How ClusterFuzzLite (and OSS-Fuzz) use this file: their `compile` step runs it inside the image
# built from .clusterfuzzlite/Dockerfile, with the repository in $SRC/recheck (the working dir),
# and with CXX, CXXFLAGS (sanitizer + -fsanitize=fuzzer-no-link), LIB_FUZZING_ENGINE, SANITIZER
# and OUT set. Whatever it leaves in $OUT is all the fuzzing bots get: the two targets, their
# .dict/.options, <target>_seed_corpus.zip, and lib/ with the shared libraries they load.
# The bots then run each target with its options, dictionary and seed corpus (PR fuzzing,
# batch fuzzing, corpus pruning, coverage), as described in ClusterFuzzLite's build docs.
# Outside docker: SRC=<checkout> OUT=<dir> CXX=clang++ CXXFLAGS=... LIB_FUZZING_ENGINE=... \
#   BUILD_DIR=<dir> RECHECK_BUILD_JOBS=1 .clusterfuzzlite/build.sh   (the source is only read)
# shellcheck disable=SC2016  # '$ORIGIN' below is for the dynamic loader, never the shell
set -euo pipefail

: "${OUT:?OUT must name the output folder}" "${CXX:?}" "${LIB_FUZZING_ENGINE:?}"
CXXFLAGS="${CXXFLAGS:-}"

# The checkout: $SRC/recheck in the image; $SRC itself when SRC points at a checkout.
src=""
for candidate in "${RECHECK_SRC:-}" "${SRC:-}/recheck" "${SRC:-}" "$PWD"; do
  if [ -n "$candidate" ] && [ -f "$candidate/fuzz/CMakeLists.txt" ]; then
    src="$(cd "$candidate" && pwd)"
    break
  fi
done
[ -n "$src" ] || { echo "build.sh: no recheck checkout in \$SRC/recheck, \$SRC or $PWD" >&2; exit 1; }
build="${BUILD_DIR:-${WORK:+$WORK/build}}"
build="${build:-/tmp/recheck-cflite-build}"
jobs="${RECHECK_BUILD_JOBS:-$(nproc)}"
mkdir -p "$OUT" "$build"

# libtorch is built against libstdc++ and passes std::string and friends across its API, so the
# -stdlib=libc++ that OSS-Fuzz adds to CXXFLAGS would give unresolved symbols (or worse) at link.
# Everything here is compiled against libstdc++ instead.
cxxflags="$(sed -E 's/(^| )-stdlib=libc\+\+( |$)/ /g; s/  +/ /g; s/^ //; s/ $//' <<<"$CXXFLAGS")"
if [ "${SANITIZER:-}" = memory ]; then
  # MSan needs every library instrumented; libtorch, OpenMP and BLAS are not.
  echo "build.sh: the memory sanitizer is not supported (libtorch is not instrumented)" >&2
  exit 1
fi

# libtorch: the pip wheel's CMake package when python3 has torch (the image), otherwise whatever
# CMake finds by itself (Debian's libtorch-dev on a development machine).
prefix_path="${CMAKE_PREFIX_PATH:-}"
if torch_prefix="$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null)"; then
  prefix_path="$torch_prefix${prefix_path:+;$prefix_path}"
fi

# FuzzedDataProvider.h ships with the compiler's own resource dir (OSS-Fuzz's clang lives in
# /usr/local, where the project's default search for Debian's llvm packages does not look).
fdp_dir="$("$CXX" -print-resource-dir)/include"
fdp_args=()
[ -f "$fdp_dir/fuzzer/FuzzedDataProvider.h" ] && fdp_args=(-DRECHECK_FUZZED_DATA_PROVIDER_DIR="$fdp_dir")

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

# CMAKE_BUILD_TYPE=OssFuzz is a name with no flags of its own, so only the engine's CXXFLAGS
# apply (the project's default, RelWithDebInfo, would add -O2 and -DNDEBUG, hiding asserts).
# CMAKE_BUILD_RPATH puts $ORIGIN/lib into the binaries even without patchelf (see below).
cmake -S "$src" -B "$build" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=OssFuzz \
  -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_CXX_FLAGS="$cxxflags" \
  -DCMAKE_PREFIX_PATH="$prefix_path" \
  -DCMAKE_BUILD_RPATH='$ORIGIN/lib' \
  -DRECHECK_TESTS=OFF \
  -DRECHECK_FUZZERS=ON \
  -DRECHECK_LIB_FUZZING_ENGINE="$LIB_FUZZING_ENGINE" \
  "${fdp_args[@]}"
cmake --build "$build" -j "$jobs" --target recheck_fuzz_check recheck_fuzz_inputs

targets=(recheck_fuzz_check recheck_fuzz_inputs)
for target in "${targets[@]}"; do
  cp "$build/fuzz/$target" "$OUT/"
  cp "$src/fuzz/$target.dict" "$src/fuzz/$target.options" "$OUT/"
done

# Seed corpora: <target>_seed_corpus.zip next to the target is what the bots unpack.
rm -f "$OUT"/recheck_fuzz_check_seed_corpus.zip "$OUT"/recheck_fuzz_inputs_seed_corpus.zip
zip -q -j "$OUT/recheck_fuzz_check_seed_corpus.zip" "$src"/corpus/fuzz-check/*
zip -q -j "$OUT/recheck_fuzz_inputs_seed_corpus.zip" "$src"/corpus/seeds/*.json

# Shared libraries. The targets link libtorch (and, through it, c10, OpenMP, BLAS...) as shared
# objects, and the bots run them in a bare runner image where nothing from this image is
# installed: only $OUT travels. So every library the loader resolves, except the C/C++ runtime
# that every image has, is copied into $OUT/lib, and the binaries look there first: RUNPATH
# $ORIGIN/lib ('$ORIGIN' is expanded by the loader at run time, hence the single quotes). A
# RUNPATH only serves its own object's direct dependencies, so each copied library that has no
# $ORIGIN of its own (the pip wheel's have one; Debian's have none) gets RUNPATH $ORIGIN too.
system_lib='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libutil|libresolv|libgcc_s|libstdc\+\+)\.so'
mkdir -p "$OUT/lib"
for target in "${targets[@]}"; do
  ldd "$OUT/$target" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | while read -r lib; do
    name="$(basename "$lib")"
    grep -Eq "$system_lib" <<<"$name" && continue
    [ -e "$OUT/lib/$name" ] || cp -L "$lib" "$OUT/lib/$name"
  done
done
if command -v patchelf >/dev/null; then
  for target in "${targets[@]}"; do
    patchelf --set-rpath '$ORIGIN/lib' "$OUT/$target"
  done
  for lib in "$OUT"/lib/*.so*; do
    case "$(patchelf --print-rpath "$lib")" in
      *'$ORIGIN'*) ;;
      *) patchelf --set-rpath '$ORIGIN' "$lib" ;;
    esac
  done
else
  # Without patchelf the binaries still carry $ORIGIN/lib (CMAKE_BUILD_RPATH, after the build
  # tree's own entries); libraries without an $ORIGIN of their own then find their dependencies
  # only where the runner has them installed.
  echo "build.sh: patchelf not found; binaries keep CMake's rpath plus \$ORIGIN/lib" >&2
fi
ls -l "$OUT"
