"""The worker's Kafka clients: the ONE package of ``connect`` that produces and consumes
records (group membership speaks the protocol itself in ``membership``, over the client
layer's connections). Everything goes through the client layer (``oncelog.client``:
``ClientConfig`` for bootstrap servers, TLS and SASL; ``Admin`` and ``GroupAdmin`` for
admin calls; ``KafkaProducer`` and ``KafkaConsumer``, confluent-kafka's, for records), and
its errors are the client layer's ``ClientError``, decided by Kafka error code.

- :class:`TaskClients` implements the worker's ``ClientFactory``: each source task's
  idempotent producer, the offset writer, each sink task's consumer in group
  ``connect-<name>`` and the dead letter producer, with the settings that
  ``client_configs`` assembles (worker prefixes and connector overrides).
- :class:`TopicLogConsumer` reads an internal topic (``internal_log.LogConsumer``).
- :class:`TopicWriter` writes config and status records.
- :class:`TransactionalTopicWriter` is the leader's config-topic writer when exactly-once
  source support is ``preparing`` or ``enabled`` (KIP-618): one transaction per write,
  transactional id ``connect-cluster-<group>``, so a zombie leader's writes fail.
- :class:`ProducerFencer` fences task producers (``Admin.fence_producers``) with the
  connector's admin settings.
- :class:`InternalTopicAdmin` creates the internal topics (compacted, with Kafka's
  partition counts) and checks their cleanup policy.
- :class:`SinkOffsetsAdmin` reads and changes a sink connector's consumer group
  offsets (KIP-875).

Settings keep Kafka's (Java) names where librdkafka knows them under the same name.

Modules: ``settings`` (client settings and error translation shared by the others),
``task_clients`` (what tasks and the herder's admin work use) and ``internal_topics``
(the config, status and offsets topics).
"""
