"""What runs on one worker, as Kafka Connect's ``runtime`` package: the ``Worker``,
connector instances, the source and sink task loops, plugins and the worker's
configuration."""
