"""The worker's REST API, as Kafka Connect's ``runtime.rest`` package."""
