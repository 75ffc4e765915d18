"""Kafka-Connect-compatible runtime: distributed workers, REST API and connectors (docs/connect.md)."""
