"""The StreamingRawDataset examples of upstream's docs, on local data (and the S3 test server)."""

from __future__ import annotations

import io
from collections import defaultdict
from pathlib import Path

import pytest
from PIL import Image
from torch.utils.data import DataLoader

from litdata import StreamingRawDataset
from litdata.raw.indexer import FileMetadata
from tests.support.servers import S3Server


def _image(path: Path, color: tuple[int, int, int], fmt: str) -> None:
    Image.new("RGB", (8, 6), color).save(path, format=fmt)


def to_image(data: bytes) -> Image.Image:
    return Image.open(io.BytesIO(data)).convert("RGB")


def test_quick_start(tmp_path: Path) -> None:
    (tmp_path / "images").mkdir()
    for i in range(6):
        _image(tmp_path / "images" / f"{i}.jpg", (40 * i, 0, 0), "JPEG")
    dataset = StreamingRawDataset(
        str(tmp_path / "images"),
        transform=to_image,  # optional; default yields raw bytes
        storage_options={},  # optional cloud credentials / endpoint
        cache_dir=str(tmp_path / "cache"),
    )
    loader = DataLoader(dataset, batch_size=4, num_workers=2, collate_fn=list)
    batches = list(loader)
    assert [len(b) for b in batches] == [4, 2]
    assert all(isinstance(img, Image.Image) and img.size == (8, 6) for b in batches for img in b)


class SegmentationRawDataset(StreamingRawDataset):
    def setup(self, files: list[FileMetadata]) -> list[list[FileMetadata]]:
        # Pair img_001.jpg with img_001.png (mask) by stem
        by_stem: dict[str, dict[str, FileMetadata]] = defaultdict(dict)
        for f in files:
            name = f.path.rsplit("/", 1)[-1]
            stem, _, ext = name.rpartition(".")
            by_stem[stem][ext.lower()] = f
        items = []
        for _stem, parts in sorted(by_stem.items()):
            if "jpg" in parts and "png" in parts:
                items.append([parts["jpg"], parts["png"]])
        return items


def test_group_related_files(tmp_path: Path) -> None:
    seg = tmp_path / "seg"
    seg.mkdir()
    for i in range(5):
        _image(seg / f"img_{i:03d}.jpg", (0, 50 * i, 0), "JPEG")
        _image(seg / f"img_{i:03d}.png", (i, i, i), "PNG")
    (seg / "img_999.jpg").write_bytes((seg / "img_000.jpg").read_bytes())  # no mask: dropped
    dataset = SegmentationRawDataset(
        str(seg),
        transform=lambda pair: (pair[0], pair[1]),  # list[bytes]: [image, mask]
        cache_dir=str(tmp_path / "cache"),
    )
    assert len(dataset) == 5
    loader = DataLoader(dataset, batch_size=2, num_workers=2, collate_fn=lambda b: tuple(zip(*b)))
    pairs = [(img, mask) for images, masks in loader for img, mask in zip(images, masks)]
    assert len(pairs) == 5
    assert all(img[:2] == b"\xff\xd8" and mask[:4] == b"\x89PNG" for img, mask in pairs)


@pytest.mark.cloud
def test_index_caching_and_raw_bytes(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> None:
    from litdata_io import get_storage

    options = s3_server.storage_options()
    storage = get_storage(f"s3://{s3_bucket}/files", options)
    storage.put("a.npy", b"\x01\x02")
    cache = str(tmp_path / "cache")
    dataset = StreamingRawDataset(f"s3://{s3_bucket}/files/", storage_options=options, cache_dir=cache)
    raw: bytes = dataset[0]
    assert raw == b"\x01\x02"
    # After adding/removing files on the bucket:
    storage.put("b.npy", b"\x03")
    assert len(StreamingRawDataset(f"s3://{s3_bucket}/files/", storage_options=options, cache_dir=cache)) == 1
    dataset = StreamingRawDataset(
        f"s3://{s3_bucket}/files/", recompute_index=True, storage_options=options, cache_dir=cache
    )
    assert [dataset[i] for i in range(len(dataset))] == [b"\x01\x02", b"\x03"]
