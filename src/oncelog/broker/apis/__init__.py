"""One module per Kafka API, named by the API; ``registry`` collects them.

Each module declares ``API = ApiSpec(key, min_version, max_version, handler)``
next to its handler. Modules without an ``API`` hold helpers shared by several
APIs: ``spec``, ``registry``, ``wire_values``, ``compat``, ``commit_shapes``,
``config_resources``.
"""
