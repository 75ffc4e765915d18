"""The client layer: everything outside the broker (Spark, CLI, the Connect worker) reaches
a Kafka-protocol cluster through here, never through broker code. It is the one layer that
wraps confluent-kafka (an import-linter contract): nothing else imports it, and its errors
reach callers as :class:`~.errors.ClientError` by Kafka error code.

* :mod:`.config` — :class:`ClientConfig`: bootstrap servers and librdkafka-style connection
  settings; :mod:`.security` parses ``security.protocol``, ``ssl.*`` and ``sasl.*``.
* :mod:`.admin` — :class:`Admin`: topics and offsets (confluent-kafka's AdminClient);
  :mod:`.groups` consumer groups, :mod:`.acl_admin` ACLs (in Kafka's model,
  ``oncelog.security.acl``), :mod:`.scram_admin` SCRAM users, on the same client.
* :mod:`.kafka_producer` — :class:`KafkaProducer` and :mod:`.consumer` —
  :class:`KafkaConsumer`: confluent-kafka's producer and consumer with the client layer's
  types (records, delivery reports, ClientErrors).
* :mod:`.transactions` — :class:`TxnAdmin`: other producers' transactions (EndTxn,
  InitProducerId, DescribeTransactions, KIP-664), over :mod:`.protocol`, oncelog's small
  protocol client (:mod:`.wire` connections with TLS and SASL, :mod:`.sasl`).
* :mod:`.retry` — the one retry policy; :mod:`.errors` — errors by Kafka error code.

* :mod:`.producer` — :class:`TransactionalProducer`: oncelog's own transactional producer
  for what librdkafka cannot do (two-phase commit, KIP-939), with :mod:`.batching` (its
  pure record accumulator, encoding with ``oncelog.records``) and :mod:`.partitioner`
  (Java's murmur2).
"""
