"""`litdata cache path|clear`, through main(), `python -m litdata` and the installed script."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from litdata._cli import main
from litdata_format import ChunkInfo
from litdata_io import ChunkCache, get_storage


@pytest.fixture
def cache_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache-root"
    monkeypatch.setenv("LITDATA_CACHE_DIR", str(root))
    return root


def fill(tmp_path: Path, root: Path) -> ChunkCache:
    (tmp_path / "data").mkdir()
    for i in range(3):
        (tmp_path / "data" / f"chunk-0-{i}.bin").write_bytes(b"x" * 100)
    cache = ChunkCache(root / "dataset", get_storage(str(tmp_path / "data")), "1MB")
    for i in range(3):
        cache.ensure(ChunkInfo(f"chunk-0-{i}.bin", 100, 1))
    return cache


def test_cache_path(cache_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cache", "path"]) == 0
    assert capsys.readouterr().out.strip() == str(cache_root)


def test_cache_clear(tmp_path: Path, cache_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = fill(tmp_path, cache_root)
    info = ChunkInfo("chunk-0-0.bin", 100, 1)
    with cache.use(info) as in_use:
        assert main(["cache", "clear"]) == 0
        captured = capsys.readouterr()
        assert f"Removed 2 files (200 B) from {cache_root}" in captured.out
        assert str(in_use) in captured.err
        assert in_use.read_bytes() == b"x" * 100
    assert main(["cache", "clear"]) == 0
    assert not cache_root.exists()
    assert (tmp_path / "data" / "chunk-0-0.bin").exists()  # the source is never touched


def test_cache_clear_other_path(tmp_path: Path, cache_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fill(tmp_path, tmp_path / "elsewhere")
    assert main(["cache", "clear", "--path", str(tmp_path / "elsewhere")]) == 0
    assert "Removed 3 files (300 B)" in capsys.readouterr().out
    assert not (tmp_path / "elsewhere").exists()


def test_cache_clear_refuses_a_home_folder(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cache", "clear", "--path", str(Path.home())]) == 2
    assert "not a cache folder" in capsys.readouterr().err


def test_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    assert "cache" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        main(["cache"])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit):
        main(["nope"])


def test_module_and_script(tmp_path: Path, cache_root: Path) -> None:
    env = {**os.environ, "LITDATA_CACHE_DIR": str(cache_root)}
    module = subprocess.run(
        [sys.executable, "-m", "litdata", "cache", "path"], env=env, capture_output=True, text=True, check=True
    )
    assert module.stdout.strip() == str(cache_root)
    script = shutil.which("litdata", path=str(Path(sys.executable).parent))
    assert script is not None, "the litdata console script is not installed"
    fill(tmp_path, cache_root)
    cleared = subprocess.run([script, "cache", "clear"], env=env, capture_output=True, text=True, check=True)
    assert "Removed 3 files" in cleared.stdout
    assert not cache_root.exists()
