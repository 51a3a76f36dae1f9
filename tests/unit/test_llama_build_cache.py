"""scripts/build_llama.sh reuses a cached llama-cpp-python wheel only if it was built
with the same flags, and builds with an explicit instruction set (never GGML_NATIVE,
never AMX, AVX-512 only where the CPU lists it) by default.

``pip`` is replaced by a script that records its CMAKE_ARGS and writes an empty wheel:
what is under test is the cache's logic, not the compiler.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "build_llama.sh"
WHEEL = "llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl"
FAKE_PIP = f"""#!/usr/bin/env bash
set -e
echo "$CMAKE_ARGS" >> "$BUILD_LOG"
while [ $# -gt 0 ]; do [ "$1" = -w ] && out="$2"; shift; done
touch "$out/{WHEEL}"
"""


AMX_XEON = "fpu sse4_2 avx avx2 fma f16c bmi2 avx512f avx512cd avx512bw avx512dq avx512vl "
AMX_XEON += "avx512_vnni avx512_bf16 amx_tile amx_int8 amx_bf16"
OLD_CPU = "fpu sse4_2 avx avx2 fma f16c bmi2"


def default_flags(tmp_path: Path, cpu_flags: str) -> str:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {cpu_flags}\n")
    env = {**os.environ, "CPUINFO": str(cpuinfo)}
    return subprocess.run(
        [str(SCRIPT), "--flags"], env=env, capture_output=True, text=True, check=True
    ).stdout


def enabled(flags: str) -> set[str]:
    return {f.removeprefix("-DGGML_").removesuffix("=ON") for f in flags.split() if "=ON" in f}


def test_an_amx_xeon_gets_avx512_and_never_amx(tmp_path):
    flags = default_flags(tmp_path, AMX_XEON)
    assert "-DGGML_NATIVE=OFF" in flags
    assert {"AVX2", "FMA", "F16C", "AVX512", "AVX512_VNNI", "AVX512_BF16"} <= enabled(flags)
    assert not any(name.startswith("AMX") for name in enabled(flags))


def test_a_cpu_without_avx512_gets_the_avx2_baseline(tmp_path):
    flags = default_flags(tmp_path, OLD_CPU)
    baseline = subprocess.run([str(SCRIPT), "--baseline"], capture_output=True, text=True)
    assert flags == baseline.stdout and "AVX512" not in " ".join(enabled(flags))


def build(tmp_path: Path, flags: str | None = None) -> tuple[Path, list[str], str]:
    pip = tmp_path / "pip"
    pip.write_text(FAKE_PIP)
    pip.chmod(0o755)
    log = tmp_path / "builds.log"
    env = {
        **{k: v for k, v in os.environ.items() if k != "LLAMA_CMAKE_ARGS"},
        "RAG_CACHE_DIR": str(tmp_path / "cache"),
        "PIP": str(pip),
        "BUILD_LOG": str(log),
    }
    if flags is not None:
        env["LLAMA_CMAKE_ARGS"] = flags
    done = subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, check=True)
    builds = log.read_text().splitlines() if log.exists() else []
    return Path(done.stdout.strip()), builds, done.stderr


def test_the_default_build_uses_the_default_flags_and_prints_them(tmp_path):
    wheel, builds, stderr = build(tmp_path)
    (flags,) = builds
    assert flags == subprocess.run([str(SCRIPT), "--flags"], capture_output=True, text=True).stdout
    assert f"CMAKE_ARGS={flags}" in stderr  # the flags are printed in the build step
    assert wheel.name == WHEEL and (wheel.parent / "build-flags.txt").read_text() == flags


def test_a_wheel_built_with_the_same_flags_is_reused(tmp_path):
    first, _, _ = build(tmp_path)
    again, builds, stderr = build(tmp_path)
    assert again == first and len(builds) == 1
    assert "built with:" in stderr


def test_a_wheel_built_with_other_flags_is_not_reused(tmp_path):
    native, _, _ = build(tmp_path, "-DLLAVA_BUILD=OFF")  # the old, native default
    legacy = tmp_path / "cache" / "wheels" / WHEEL  # where earlier versions cached it
    legacy.touch()
    portable, builds, _ = build(tmp_path)
    assert len(builds) == 2 and portable.parent != native.parent != legacy.parent
    assert builds == ["-DLLAVA_BUILD=OFF", (portable.parent / "build-flags.txt").read_text()]


def test_a_stamp_that_disagrees_with_the_wheel_forces_a_rebuild(tmp_path):
    wheel, _, _ = build(tmp_path)
    (wheel.parent / "build-flags.txt").write_text("-DGGML_NATIVE=ON")  # half-written earlier
    _, builds, _ = build(tmp_path)
    assert len(builds) == 2
