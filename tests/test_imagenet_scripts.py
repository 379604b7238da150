"""The ready-made ImageNet scripts (benchmarks/litdata/) on a small generated ImageNet-style folder.

No speed is asserted: the scripts run as a user runs them (a fresh python process), write a
dataset that streams back every image with its label, and print what they promise.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from litdata_format import DatasetReader
from tests.support.servers import S3Server

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "benchmarks" / "litdata"


def _imagenet(folder: Path, classes: int = 3, per_class: int = 4) -> Path:
    rng = np.random.default_rng(0)
    for c in range(classes):
        (folder / f"n0{c:07d}").mkdir(parents=True)
        for i in range(per_class):
            pixels = rng.integers(0, 255, (24 + 4 * i, 32, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(folder / f"n0{c:07d}" / f"img_{i}.JPEG", quality=95)
    (folder / "README.txt").write_text("not a class")
    return folder


def _run(script: str, *args: str, env: dict[str, str] | None = None) -> str:
    out = subprocess.run([sys.executable, str(SCRIPTS / script), *args], capture_output=True, text=True,
                         timeout=300, check=False, env=env)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def _labels_and_images(path: Path) -> list[tuple[int, Any]]:
    reader = DatasetReader(path)
    try:
        return [(int(s["label"]), s["image"]) for s in reader]
    finally:
        reader.close()


def test_jpeg_at_quality_90_then_streamed(tmp_path: Path) -> None:
    source = _imagenet(tmp_path / "train")
    printed = _run("optimize_imagenet.py", "--input_dir", str(source), "--output_dir", str(tmp_path / "jpeg"),
                   "--write_mode", "jpeg", "--quality", "90", "--num_workers", "2")  # fmt: skip
    assert re.search(r"throughput: [\d,.]+ images/s", printed) and "peak memory:" in printed
    assert "images: 12" in printed and "output size:" in printed
    samples = _labels_and_images(tmp_path / "jpeg")
    assert sorted(label for label, _ in samples) == [0] * 4 + [1] * 4 + [2] * 4
    assert all(image.shape[0] == 3 for _, image in samples)  # decoded RGB (C, H, W)

    printed = _run("stream_imagenet.py", "--input_dir", str(tmp_path / "jpeg"), "--batch_size", "5",
                   "--num_workers", "2", "--epochs", "2")  # fmt: skip
    line = r"epoch (\d): 12 images in [\d.]+ s, throughput: [\d,.]+ images/s, first batch: [\d.]+ s"
    epochs = re.findall(line, printed)
    assert epochs == ["0", "1"], printed
    assert re.search(r"peak memory: [\d,]+ MiB", printed)


def test_raw_bytes_streamed_from_a_bucket(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> None:
    source = _imagenet(tmp_path / "val", classes=2, per_class=3)
    env = {**os.environ, "AWS_ENDPOINT_URL": s3_server.endpoint, "AWS_ACCESS_KEY_ID": s3_server.access_key,
           "AWS_SECRET_ACCESS_KEY": s3_server.secret_key, "AWS_DEFAULT_REGION": s3_server.region,
           "LITDATA_CACHE_DIR": str(tmp_path / "cache")}  # fmt: skip
    url = f"s3://{s3_bucket}/imagenet/val"
    printed = _run("optimize_imagenet.py", "--input_dir", str(source), "--output_dir", url, "--write_mode", "raw",
                   "--num_workers", "1", env=env)  # fmt: skip
    assert "images: 6" in printed and "throughput:" in printed
    printed = _run("stream_imagenet.py", "--input_dir", url, "--batch_size", "4", "--num_workers", "1", "--decode",
                   "--no-shuffle", env=env)  # fmt: skip
    assert re.search(r"epoch 0: 6 images in .* first batch: [\d.]+ s", printed), printed


def test_a_folder_without_class_folders_is_refused(tmp_path: Path) -> None:
    (tmp_path / "flat").mkdir()
    command = [sys.executable, str(SCRIPTS / "optimize_imagenet.py"), "--input_dir", str(tmp_path / "flat"),
               "--output_dir", str(tmp_path / "o")]  # fmt: skip
    out = subprocess.run(command, capture_output=True, text=True, check=False)
    assert out.returncode != 0 and "has no class folders" in out.stderr


@pytest.mark.parametrize("mode", ["raw"])
def test_raw_keeps_the_files_bytes(tmp_path: Path, mode: str) -> None:
    source = _imagenet(tmp_path / "train", classes=1, per_class=2)
    _run("optimize_imagenet.py", "--input_dir", str(source), "--output_dir", str(tmp_path / mode), "--write_mode", mode,
         "--num_workers", "1")  # fmt: skip
    stored = sorted(image for _, image in _labels_and_images(tmp_path / mode))
    assert stored == sorted(p.read_bytes() for p in (source / "n00000000").iterdir())
