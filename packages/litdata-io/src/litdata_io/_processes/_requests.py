"""Storage calls as values: one frozen dataclass per :class:`~litdata_io._storage._interface.Storage` method.

A process whose obstore calls run in its helper (see :mod:`litdata_io._processes._helper`) sends one of these
instead of running the method: its fields are the method's arguments, by name, and
:meth:`Request.run` calls that method on the storage at the other end. Local paths are made
absolute when the value is built (the helper's working folder is not the caller's), and a
memoryview becomes bytes (it does not pickle).
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from litdata_io._storage._interface import ObjectInfo, Storage

__all__ = [
    "Copy",
    "Delete",
    "Download",
    "DownloadHashed",
    "Get",
    "GetRange",
    "Head",
    "Listing",
    "ListingPage",
    "Put",
    "PutNew",
    "ReplaceIf",
    "Request",
    "Upload",
]

_R = TypeVar("_R")


class Request(ABC, Generic[_R]):
    """One storage call, run by :meth:`run` wherever the value is received."""

    @abstractmethod
    def about(self) -> str:
        """The key the call is about (named, as a URL, in its errors)."""

    @abstractmethod
    async def run(self, storage: Storage) -> _R:
        """Make the call on ``storage``; its result."""


@dataclass(frozen=True)
class _OnKey:
    key: str

    def about(self) -> str:
        return self.key


@dataclass(frozen=True)
class Head(_OnKey, Request[ObjectInfo]):
    """:meth:`Storage.ahead`."""

    async def run(self, storage: Storage) -> ObjectInfo:
        return await storage.ahead(self.key)


@dataclass(frozen=True)
class Listing(Request[list[ObjectInfo]]):
    """:meth:`Storage.alist`."""

    prefix: str = ""
    recursive: bool = True

    def about(self) -> str:
        return self.prefix

    async def run(self, storage: Storage) -> list[ObjectInfo]:
        return await storage.alist(self.prefix, self.recursive)


@dataclass(frozen=True)
class ListingPage(Request[tuple[list[ObjectInfo], str]]):
    """:meth:`Storage.alist_page`."""

    prefix: str = ""
    start_after: str = ""
    limit: int = 1000

    def about(self) -> str:
        return self.prefix

    async def run(self, storage: Storage) -> tuple[list[ObjectInfo], str]:
        return await storage.alist_page(self.prefix, self.start_after, self.limit)


@dataclass(frozen=True)
class Get(_OnKey, Request[bytes]):
    """:meth:`Storage.aget`."""

    async def run(self, storage: Storage) -> bytes:
        return await storage.aget(self.key)


@dataclass(frozen=True)
class GetRange(_OnKey, Request[bytes]):
    """:meth:`Storage.aget_range`."""

    start: int
    end: int

    async def run(self, storage: Storage) -> bytes:
        return await storage.aget_range(self.key, self.start, self.end)


@dataclass(frozen=True)
class Put(_OnKey, Request[None]):
    """:meth:`Storage.aput`."""

    data: bytes

    def __post_init__(self) -> None:
        if isinstance(self.data, memoryview):  # pyright: ignore[reportUnnecessaryIsInstance] - callers pass buffers
            object.__setattr__(self, "data", self.data.tobytes())

    async def run(self, storage: Storage) -> None:
        await storage.aput(self.key, self.data)


@dataclass(frozen=True)
class PutNew(_OnKey, Request[bool]):
    """:meth:`Storage.aput_new`."""

    data: bytes

    async def run(self, storage: Storage) -> bool:
        return await storage.aput_new(self.key, self.data)


@dataclass(frozen=True)
class ReplaceIf(_OnKey, Request[bool]):
    """:meth:`Storage.areplace_if`."""

    data: bytes
    expected: ObjectInfo

    async def run(self, storage: Storage) -> bool:
        return await storage.areplace_if(self.key, self.data, self.expected)


@dataclass(frozen=True)
class Delete(_OnKey, Request[None]):
    """:meth:`Storage.adelete`."""

    async def run(self, storage: Storage) -> None:
        await storage.adelete(self.key)


@dataclass(frozen=True)
class Copy(Request[None]):
    """:meth:`Storage.acopy`."""

    src_key: str
    dst_key: str

    def about(self) -> str:
        return self.src_key

    async def run(self, storage: Storage) -> None:
        await storage.acopy(self.src_key, self.dst_key)


@dataclass(frozen=True)
class Upload(Request[None]):
    """:meth:`Storage.aupload` (the helper reads the local file itself)."""

    source: str | Path
    key: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", os.path.abspath(self.source))

    def about(self) -> str:
        return self.key

    async def run(self, storage: Storage) -> None:
        await storage.aupload(self.source, self.key)


@dataclass(frozen=True)
class _ToFile(_OnKey):
    destination: str | Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "destination", os.path.abspath(self.destination))


@dataclass(frozen=True)
class Download(_ToFile, Request[int]):
    """:meth:`Storage.adownload` (the helper writes the local file itself)."""

    async def run(self, storage: Storage) -> int:
        return await storage.adownload(self.key, self.destination)


@dataclass(frozen=True)
class DownloadHashed(_ToFile, Request[tuple[int, str]]):
    """:meth:`Storage.adownload_hashed` (the helper writes and hashes the local file itself)."""

    async def run(self, storage: Storage) -> tuple[int, str]:
        return await storage.adownload_hashed(self.key, self.destination)
