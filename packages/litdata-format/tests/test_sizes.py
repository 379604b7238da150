"""Byte sizes for messages: the binary unit that fits."""

from __future__ import annotations

import pytest

from litdata_format.internal import format_size, parse_size


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (40 * 2**20, "40.0 MiB"),
        (int(1.5 * 2**30), "1.5 GiB"),
        (3 * 2**40, "3.0 TiB"),
        (5000 * 2**40, "5000.0 TiB"),
    ],
)
def test_format_size_picks_the_unit_that_fits(size: int, text: str) -> None:
    assert format_size(size) == text


def test_format_size_reads_back() -> None:
    assert parse_size(format_size(40 * 2**20).replace(" ", "")) == 40 * 2**20
