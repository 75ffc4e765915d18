"""The exactly-once demo (``oncelog demo``, ``python -m oncelog.demo``) and the example
orders pipeline it runs (``python -m oncelog.demo.pipeline``)."""
