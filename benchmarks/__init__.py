"""Side-by-side benchmarks against upstream LitData and MosaicML Streaming: run ``python -m benchmarks.<script>``."""
