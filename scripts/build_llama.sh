#!/usr/bin/env bash
# Builds the llama-cpp-python wheel once per set of build flags and prints its path.
#
#   scripts/build_llama.sh [CMAKE_ARGS]   build (default: $LLAMA_CMAKE_ARGS, else default_flags)
#   scripts/build_llama.sh --flags        print default_flags for this CPU
#   scripts/build_llama.sh --baseline     print BASELINE_FLAGS
#
# Why not ggml's default (GGML_NATIVE=ON)? It compiles for the building CPU, and on Xeons
# with AMX (amx_tile/amx_int8) ggml then repacks Q4_K_M weights into an AMX buffer and the
# first completion segfaults (llama.cpp issue 20824, closed without a fix). So the
# instruction set is explicit and never includes AMX: the AVX2 baseline that every x86-64
# CPU of the last decade runs, plus AVX-512 where /proc/cpuinfo lists it (prefill ran 1.5x
# faster with it on a 2-core Xeon: docs_corpus/performance.md). People who know their
# hardware (CUDA, Metal) set LLAMA_CMAKE_ARGS.
#
# The wheel lives in $WHEELS/llama-<hash of version and flags>/ beside a build-flags.txt
# stamp, so a wheel built with other flags (e.g. an earlier native build, or one made for
# a CPU without AVX-512 sharing this cache) is never reused.
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_VERSION="0.3.36"
BASELINE_FLAGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"

# BASELINE_FLAGS, plus each AVX-512 extension ggml can use that this CPU has (never AMX).
default_flags() {
    local cpu flags="$BASELINE_FLAGS"
    cpu=" $(grep -m1 "^flags" "${CPUINFO:-/proc/cpuinfo}" 2>/dev/null | cut -d: -f2 || true) "
    if [[ $cpu == *" avx512f "* && $cpu == *" avx512cd "* && $cpu == *" avx512bw "* \
        && $cpu == *" avx512dq "* && $cpu == *" avx512vl "* ]]; then
        flags+=" -DGGML_AVX512=ON"
        [[ $cpu == *" avx512vbmi "* ]] && flags+=" -DGGML_AVX512_VBMI=ON"
        [[ $cpu == *" avx512_vnni "* ]] && flags+=" -DGGML_AVX512_VNNI=ON"
        [[ $cpu == *" avx512_bf16 "* ]] && flags+=" -DGGML_AVX512_BF16=ON"
    fi
    printf '%s' "$flags"
}

case "${1:-}" in
    --flags) default_flags; exit 0 ;;
    --baseline) printf '%s' "$BASELINE_FLAGS"; exit 0 ;;
esac
CMAKE_FLAGS="${1:-${LLAMA_CMAKE_ARGS:-$(default_flags)}}"
CACHE="${RAG_CACHE_DIR:-$HOME/.cache/agentic-rag}"
KEY="$(printf 'llama-cpp-python==%s %s' "$LLAMA_VERSION" "$CMAKE_FLAGS" | sha256sum | cut -c1-12)"
DIR="$CACHE/wheels/llama-$KEY"
PIP="${PIP:-.venv/bin/pip}"

wheel() { ls "$DIR"/llama_cpp_python-"$LLAMA_VERSION"-*.whl 2>/dev/null | head -n1; }

if [ -z "$(wheel)" ] || [ "$(cat "$DIR/build-flags.txt" 2>/dev/null)" != "$CMAKE_FLAGS" ]; then
    printf '\n==> building llama-cpp-python %s once (3-9 minutes; cached in %s)\n' "$LLAMA_VERSION" "$DIR" >&2
    printf '    CMAKE_ARGS=%s\n' "$CMAKE_FLAGS" >&2
    tmp="$(mktemp -d)"
    # --no-cache-dir: pip's own cache would hand back a wheel built with other flags
    CMAKE_ARGS="$CMAKE_FLAGS" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
        "$PIP" wheel --no-deps --no-cache-dir --progress-bar on -w "$tmp" \
        "llama-cpp-python==$LLAMA_VERSION" >&2
    rm -rf "$DIR" && mkdir -p "$DIR"
    mv "$tmp"/llama_cpp_python-*.whl "$DIR"/
    printf '%s' "$CMAKE_FLAGS" >"$DIR/build-flags.txt"
    rm -rf "$tmp"
else
    printf '    llama-cpp-python %s built with: %s\n' "$LLAMA_VERSION" "$CMAKE_FLAGS" >&2
fi
wheel
