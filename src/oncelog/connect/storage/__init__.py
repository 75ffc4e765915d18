"""Kafka Connect's three backing stores (config, offsets, status): the records of
each internal topic, the state read from it, and its reader and writer."""
