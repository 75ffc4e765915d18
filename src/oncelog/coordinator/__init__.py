"""What the transaction and group coordinators share: the runtime that drives a pure core,
the internal topics they own, key placement and typed settings."""
