"""The broker's HTTP listener: Prometheus metrics and the web console."""
