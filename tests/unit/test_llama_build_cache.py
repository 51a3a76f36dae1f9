"""scripts/build_llama.sh reuses a cached llama-cpp-python wheel only if it was built
with the same flags, and builds portably (never GGML_NATIVE, never AMX) by default.

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


def test_the_default_build_is_portable_and_never_uses_amx(tmp_path):
    wheel, builds, stderr = build(tmp_path)
    (flags,) = builds
    assert "-DGGML_NATIVE=OFF" in flags and "-DGGML_AVX2=ON" in flags
    assert "AMX" not in flags.replace("AMX_TILE=OFF", "").replace("AMX_INT8=OFF", "").replace(
        "AMX_BF16=OFF", ""
    )
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
