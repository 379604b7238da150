"""The datasets made of several ``StreamingDataset``.

``CombinedStreamingDataset`` (``combined``), ``ParallelStreamingDataset`` (``parallel``), and what
they share (``shared``).
"""
