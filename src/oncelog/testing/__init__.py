"""Test harness pieces shipped with oncelog: fault injection (kill points of the Spark sink)
and output verification with independent read_committed consumers. Never imported by the
library packages."""
