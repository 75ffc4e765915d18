"""oncelog: a Kafka-wire-compatible exactly-once streaming log."""

import sys as _sys


def _load_kio_without_hypothesis() -> None:
    """Import kio with Hypothesis hidden, unless Hypothesis is already loaded.

    kio registers Hypothesis strategies for its types whenever Hypothesis is
    installed: at run time that costs ~150 ms of start-up and leaves a
    ``.hypothesis/`` folder in the working directory. A ``None`` entry in
    ``sys.modules`` makes kio's guarded import fail cleanly. Test runs load
    Hypothesis first (its pytest plugin), so kio's strategies stay available there.
    """
    if "hypothesis" in _sys.modules:
        return
    _sys.modules["hypothesis"] = None  # type: ignore[assignment]
    try:
        import kio.static._phantom  # noqa: F401  (the module that probes for Hypothesis)
    finally:
        del _sys.modules["hypothesis"]


_load_kio_without_hypothesis()
