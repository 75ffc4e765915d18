"""Standalone mode, as Kafka's ``connect-standalone``: one worker, no group,
offsets in a local file."""
