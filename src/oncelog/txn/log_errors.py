"""The error of the ``__transaction_state`` record codecs."""

from __future__ import annotations


class TxnLogCodecError(ValueError):
    """A ``__transaction_state`` key or value that does not decode."""
