"""Where a dataset's chunks come from and how a process opens them.

``origin`` finds a dataset's index and where its chunks are (a ``ChunkOrigin``, made once and
handed to the workers); ``source`` and ``remote`` open chunk N in this process, read in place
from local disk or fetched through the io chunk cache; ``posix`` tells how a local file system is
read; ``readahead`` asks the page cache for the chunks a local reader reaches next.
"""
