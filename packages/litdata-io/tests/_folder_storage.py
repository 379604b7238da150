"""The real LocalStorage with knobs for the cache tests: slow it down, count its downloads, break it."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from litdata_io._storage._local import LocalStorage


class FolderStorage(LocalStorage):
    """A local folder as storage, named ``test://<folder name>`` in messages.

    Args:
        root: the folder.
        delay: seconds each download sleeps before writing (widens races).
        log: a file that gets one ``<pid> <key>`` line per download, appended by any process.
        torn: write the destination in place in two halves with a pause between (a backend
            whose downloads are not atomic).
        broken: fail every download with an error that does not name the URL.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        delay: float = 0.0,
        log: str | os.PathLike[str] | None = None,
        torn: bool = False,
        broken: bool = False,
    ) -> None:
        super().__init__(root, url=f"test://{Path(root).name}")
        self.delay = delay
        self.log = log
        self.torn = torn
        self.broken = broken
        self.active = 0
        self.peak = 0

    async def adownload(self, key: str, destination: str | Path) -> int:
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            if self.log is not None:
                fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
                os.write(fd, f"{os.getpid()} {key}\n".encode())
                os.close(fd)
            if self.broken:
                raise RuntimeError("connection reset by peer")
            if self.delay:
                await asyncio.sleep(self.delay)
            if not self.torn:
                return await super().adownload(key, destination)
            data = await self.aget(key)
            with open(destination, "wb") as handle:
                handle.write(data[: len(data) // 2])
                handle.flush()
                await asyncio.sleep(0.05)
                handle.write(data[len(data) // 2 :])
            return len(data)
        finally:
            self.active -= 1
