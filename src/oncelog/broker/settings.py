"""The broker's own settings, declared once with Kafka's names, types and defaults.

:class:`BrokerSettings` is the typed view the broker reads; :mod:`oncelog.broker.config`
merges its definition with the cleaner's and the coordinators' into the one
:class:`~oncelog.config.ConfigDef` that parses ``server.properties``, answers
DescribeConfigs and checks dynamic changes. Validators and types follow Kafka's
``KafkaConfig`` / ``server.config`` classes; ``group`` sorts the docs table.
"""

from __future__ import annotations

from dataclasses import dataclass

from oncelog.config.config_def import ConfigType, Importance
from oncelog.config.typed import setting
from oncelog.config.validators import OneOf, Range

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
LONG = ConfigType.LONG
HIGH = Importance.HIGH
LOW = Importance.LOW


@dataclass(frozen=True, slots=True)
class BrokerSettings:
    """Every broker setting but the cleaner's and the coordinators' (their own typed
    configs), as the broker reads them."""

    broker_id: int = setting(
        "broker.id",
        0,
        "This broker's id (Kafka's node id on a single node).",
        importance=HIGH,
        group="core",
    )
    listeners: str = setting(
        "listeners",
        "PLAINTEXT://127.0.0.1:9092",
        "Comma-separated NAME://HOST:PORT listeners the broker accepts clients on; an empty host binds every interface.",
        importance=HIGH,
        group="core",
    )
    advertised_listeners: str = setting(
        "advertised.listeners",
        "",
        "Addresses given to clients in Metadata, per listener name; empty: the listeners themselves.",
        importance=HIGH,
        group="core",
    )
    log_dirs: str = setting(
        "log.dirs",
        "/tmp/oncelog-data",
        "Directory of the broker's data (the first of a comma-separated list).",
        importance=HIGH,
        group="core",
    )
    log_dir: str = setting(
        "log.dir",
        "",
        "Directory of the broker's data; when set, it wins over log.dirs.",
        importance=HIGH,
        group="core",
    )
    num_partitions: int = setting(
        "num.partitions",
        1,
        "Partitions of an automatically created topic, and of CreateTopics without a count.",
        validator=Range.at_least(1),
        importance=HIGH,
        group="topics",
    )
    default_replication_factor: int = setting(
        "default.replication.factor",
        1,
        "Replication factor of automatically created topics (one node: accepted, 1 in effect).",
        validator=Range.at_least(1),
        group="topics",
    )
    auto_create_topics_enable: bool = setting(
        "auto.create.topics.enable",
        True,
        "Metadata requests for an unknown topic create it.",
        importance=HIGH,
        group="topics",
    )
    delete_topic_enable: bool = setting(
        "delete.topic.enable",
        True,
        "DeleteTopics is allowed (false: it answers TOPIC_DELETION_DISABLED).",
        group="topics",
    )
    socket_request_max_bytes: int = setting(
        "socket.request.max.bytes",
        104857600,
        "Largest request a connection may send, in bytes.",
        validator=Range.at_least(1),
        group="network",
    )
    queued_max_requests: int = setting(
        "queued.max.requests",
        500,
        "Requests read ahead of processing before the broker stops reading from connections.",
        group="network",
    )
    queued_max_request_bytes: int = setting(
        "queued.max.request.bytes",
        -1,
        "Bytes of requests read ahead of processing (-1: no byte limit).",
        type=LONG,
        group="network",
    )
    oncelog_max_partitions: int = setting(
        "oncelog.max.partitions",
        4000,
        "The most partitions this broker holds (each keeps about four files open).",
        group="topics",
    )
    message_max_bytes: int = setting(
        "message.max.bytes",
        1048588,
        "Largest record batch a topic accepts (the broker-wide max.message.bytes).",
        validator=Range.at_least(0),
        importance=HIGH,
        group="log",
    )
    log_segment_bytes: int = setting(
        "log.segment.bytes",
        1073741824,
        "Size at which a log segment rolls (the broker-wide segment.bytes).",
        validator=Range.at_least(14),
        importance=HIGH,
        group="log",
    )
    log_roll_ms: int = setting(
        "log.roll.ms",
        -1,
        "Age at which a log segment rolls (-1: log.roll.hours decides).",
        type=LONG,
        group="log",
    )
    log_roll_hours: int = setting(
        "log.roll.hours",
        168,
        "Age in hours at which a log segment rolls, when log.roll.ms is not set.",
        validator=Range.at_least(1),
        group="log",
    )
    log_index_size_max_bytes: int = setting(
        "log.index.size.max.bytes",
        10485760,
        "Largest offset or time index file of a segment.",
        validator=Range.at_least(4),
        group="log",
    )
    log_index_interval_bytes: int = setting(
        "log.index.interval.bytes",
        4096,
        "Bytes of records between two offset index entries.",
        validator=Range.at_least(0),
        group="log",
    )
    log_retention_ms: int = setting(
        "log.retention.ms",
        -2,
        "How long records are kept (-1: forever; -2: log.retention.minutes or .hours decide).",
        type=LONG,
        importance=HIGH,
        group="log",
    )
    log_retention_minutes: int = setting(
        "log.retention.minutes",
        -2,
        "How long records are kept, in minutes, when log.retention.ms is not set (-2: log.retention.hours).",
        importance=HIGH,
        group="log",
    )
    log_retention_hours: int = setting(
        "log.retention.hours",
        168,
        "How long records are kept, in hours, when neither log.retention.ms nor .minutes is set.",
        importance=HIGH,
        group="log",
    )
    log_retention_bytes: int = setting(
        "log.retention.bytes",
        -1,
        "Most bytes a partition keeps before its oldest segments are deleted (-1: no limit).",
        type=LONG,
        importance=HIGH,
        group="log",
    )
    log_retention_check_interval_ms: int = setting(
        "log.retention.check.interval.ms",
        300000,
        "How often retention looks for segments to delete.",
        type=LONG,
        validator=Range.at_least(1),
        group="log",
    )
    log_segment_delete_delay_ms: int = setting(
        "log.segment.delete.delay.ms",
        60000,
        "How long a segment removed by retention or replaced by the cleaner stays on disk (as *.deleted) for reads already under way.",
        type=LONG,
        validator=Range.at_least(0),
        group="log",
    )
    log_flush_interval_messages: int = setting(
        "log.flush.interval.messages",
        LONG_MAX,
        "Records appended to a partition between two fsyncs (1: every append).",
        type=LONG,
        validator=Range.at_least(1),
        importance=HIGH,
        group="log",
    )
    log_flush_interval_ms: int = setting(
        "log.flush.interval.ms",
        -1,
        "Longest time records wait in the page cache before an fsync (-1: flush.ms's default).",
        type=LONG,
        importance=HIGH,
        group="log",
    )
    log_flush_scheduler_interval_ms: int = setting(
        "log.flush.scheduler.interval.ms",
        1000,
        "How often the flusher checks whether a partition is due for an fsync.",
        type=LONG,
        group="log",
    )
    log_message_timestamp_type: str = setting(
        "log.message.timestamp.type",
        "CreateTime",
        "CreateTime (the producer's timestamps) or LogAppendTime (the broker's).",
        validator=OneOf("CreateTime", "LogAppendTime"),
        group="log",
    )
    log_cleanup_policy: str = setting(
        "log.cleanup.policy",
        "delete",
        "delete, compact, or both (comma-separated): what happens to old segments.",
        validator=OneOf("delete", "compact", many=True),
        group="log",
    )
    producer_id_expiration_ms: int = setting(
        "producer.id.expiration.ms",
        86400000,
        "How long an idle producer's state (its sequence numbers) is kept.",
        validator=Range.at_least(1),
        group="transactions",
    )
    producer_id_expiration_check_interval_ms: int = setting(
        "producer.id.expiration.check.interval.ms",
        600000,
        "How often idle producers' state is expired.",
        validator=Range.at_least(1),
        group="transactions",
    )
    transaction_remove_expired_transaction_cleanup_interval_ms: int = setting(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        3600000,
        "How often expired transactional ids are removed.",
        validator=Range.at_least(1),
        group="transactions",
    )
    fetch_max_bytes: int = setting(
        "fetch.max.bytes",
        57671680,
        "Most bytes one Fetch response carries.",
        validator=Range.at_least(1024),
        group="network",
    )
    max_incremental_fetch_session_cache_slots: int = setting(
        "max.incremental.fetch.session.cache.slots",
        1000,
        "Incremental fetch sessions (KIP-227) the broker keeps.",
        validator=Range.at_least(0),
        group="network",
    )
    max_request_partition_size_limit: int = setting(
        "max.request.partition.size.limit",
        2000,
        "Most partitions one DescribeTopicPartitions response (KIP-966) carries.",
        group="network",
    )
    cluster_id: str = setting(
        "cluster.id", "oncelog-cluster-0000000", "The cluster id the broker reports.", group="core"
    )
    num_network_threads: int = setting(
        "num.network.threads",
        3,
        "Kafka's network thread pool: accepted, no meaning for one asyncio process.",
        validator=Range.at_least(1),
        importance=LOW,
        group="compatibility",
    )
    num_io_threads: int = setting(
        "num.io.threads",
        8,
        "Kafka's request handler pool: accepted, no meaning for one asyncio process.",
        validator=Range.at_least(1),
        importance=LOW,
        group="compatibility",
    )
    num_recovery_threads_per_data_dir: int = setting(
        "num.recovery.threads.per.data.dir",
        2,
        "Kafka's log recovery threads: accepted, no meaning for one asyncio process.",
        validator=Range.at_least(1),
        importance=LOW,
        group="compatibility",
    )
    background_threads: int = setting(
        "background.threads",
        10,
        "Kafka's background thread pool: accepted, no meaning for one asyncio process.",
        validator=Range.at_least(1),
        importance=LOW,
        group="compatibility",
    )
    socket_send_buffer_bytes: int = setting(
        "socket.send.buffer.bytes",
        102400,
        "Kafka's socket send buffer: accepted, the operating system's is used.",
        importance=LOW,
        group="compatibility",
    )
    socket_receive_buffer_bytes: int = setting(
        "socket.receive.buffer.bytes",
        102400,
        "Kafka's socket receive buffer: accepted, the operating system's is used.",
        importance=LOW,
        group="compatibility",
    )
    offsets_topic_replication_factor: int = setting(
        "offsets.topic.replication.factor",
        1,
        "Replication factor of __consumer_offsets (one node: accepted, 1 in effect).",
        validator=Range.at_least(1),
        importance=LOW,
        group="compatibility",
    )
    transaction_state_log_replication_factor: int = setting(
        "transaction.state.log.replication.factor",
        1,
        "Replication factor of __transaction_state (one node: accepted, 1 in effect).",
        validator=Range.at_least(1),
        importance=LOW,
        group="compatibility",
    )
    transaction_state_log_min_isr: int = setting(
        "transaction.state.log.min.isr",
        1,
        "min.insync.replicas of __transaction_state (one node: accepted).",
        validator=Range.at_least(1),
        importance=LOW,
        group="compatibility",
    )
    min_insync_replicas: int = setting(
        "min.insync.replicas",
        1,
        "The broker-wide min.insync.replicas of topics (one node: accepted and described).",
        validator=Range.at_least(1),
        importance=HIGH,
        group="log",
    )
    listener_security_protocol_map: str = setting(
        "listener.security.protocol.map",
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "Listener name to security protocol, NAME:PROTOCOL pairs separated by commas.",
        importance=HIGH,
        group="security",
    )
    ssl_keystore_type: str = setting(
        "ssl.keystore.type",
        "PEM",
        "Format of the key store: PEM (PKCS12 and JKS files are not read).",
        group="security",
    )
    ssl_keystore_location: str = setting(
        "ssl.keystore.location",
        "",
        "File of the broker's certificate chain and private key (PEM).",
        importance=HIGH,
        group="security",
    )
    ssl_keystore_password: str = setting(
        "ssl.keystore.password",
        "",
        "Password of the key store file.",
        importance=HIGH,
        group="security",
    )
    ssl_keystore_certificate_chain: str = setting(
        "ssl.keystore.certificate.chain",
        "",
        "The broker's certificate chain, PEM text inline.",
        group="security",
    )
    ssl_keystore_key: str = setting(
        "ssl.keystore.key", "", "The broker's private key, PEM text inline.", group="security"
    )
    ssl_key_password: str = setting(
        "ssl.key.password", "", "Password of the private key.", importance=HIGH, group="security"
    )
    ssl_truststore_type: str = setting(
        "ssl.truststore.type", "PEM", "Format of the trust store: PEM.", group="security"
    )
    ssl_truststore_location: str = setting(
        "ssl.truststore.location",
        "",
        "File of the certificates clients are checked against (PEM).",
        importance=HIGH,
        group="security",
    )
    ssl_truststore_password: str = setting(
        "ssl.truststore.password",
        "",
        "Password of the trust store file.",
        importance=HIGH,
        group="security",
    )
    ssl_truststore_certificates: str = setting(
        "ssl.truststore.certificates",
        "",
        "Trusted certificates, PEM text inline.",
        group="security",
    )
    ssl_client_auth: str = setting(
        "ssl.client.auth",
        "none",
        "required, requested or none: whether TLS clients must present a certificate.",
        validator=OneOf("required", "requested", "none"),
        importance=HIGH,
        group="security",
    )
    ssl_principal_mapping_rules: str = setting(
        "ssl.principal.mapping.rules",
        "DEFAULT",
        "Rules that turn a client certificate's distinguished name into a principal (Kafka's syntax).",
        group="security",
    )
    ssl_enabled_protocols: str = setting(
        "ssl.enabled.protocols", "TLSv1.2,TLSv1.3", "TLS versions offered.", group="security"
    )
    ssl_cipher_suites: str = setting(
        "ssl.cipher.suites",
        "",
        "Cipher suites offered (empty: the TLS library's defaults).",
        group="security",
    )
    ssl_endpoint_identification_algorithm: str = setting(
        "ssl.endpoint.identification.algorithm",
        "https",
        "https: check a server certificate's host name; empty: do not.",
        group="security",
    )
    sasl_enabled_mechanisms: str = setting(
        "sasl.enabled.mechanisms",
        "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "SASL mechanisms offered: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512.",
        importance=HIGH,
        group="security",
    )
    sasl_jaas_config: str = setting(
        "sasl.jaas.config",
        "",
        "JAAS text of the SASL login module (users of PLAIN).",
        importance=HIGH,
        group="security",
    )
    sasl_server_max_receive_size: int = setting(
        "sasl.server.max.receive.size",
        524288,
        "Largest SASL message before authentication, in bytes.",
        group="security",
    )
    sasl_kerberos_service_name: str = setting(
        "sasl.kerberos.service.name",
        "",
        "Kafka's GSSAPI setting: accepted, tunes nothing (GSSAPI is not offered).",
        importance=LOW,
        group="security",
    )
    sasl_kerberos_kinit_cmd: str = setting(
        "sasl.kerberos.kinit.cmd",
        "/usr/bin/kinit",
        "Kafka's GSSAPI setting: accepted, tunes nothing (GSSAPI is not offered).",
        importance=LOW,
        group="security",
    )
    sasl_kerberos_ticket_renew_window_factor: float = setting(
        "sasl.kerberos.ticket.renew.window.factor",
        0.8,
        "Kafka's GSSAPI setting: accepted, tunes nothing (GSSAPI is not offered).",
        importance=LOW,
        group="security",
    )
    sasl_kerberos_ticket_renew_jitter: float = setting(
        "sasl.kerberos.ticket.renew.jitter",
        0.05,
        "Kafka's GSSAPI setting: accepted, tunes nothing (GSSAPI is not offered).",
        importance=LOW,
        group="security",
    )
    sasl_kerberos_min_time_before_relogin: int = setting(
        "sasl.kerberos.min.time.before.relogin",
        60000,
        "Kafka's GSSAPI setting: accepted, tunes nothing (GSSAPI is not offered).",
        type=LONG,
        importance=LOW,
        group="security",
    )
    sasl_kerberos_principal_to_local_rules: str = setting(
        "sasl.kerberos.principal.to.local.rules",
        "DEFAULT",
        "Kafka's GSSAPI setting: accepted, tunes nothing (GSSAPI is not offered).",
        importance=LOW,
        group="security",
    )
    connections_max_reauth_ms: int = setting(
        "connections.max.reauth.ms",
        0,
        "Longest session of a SASL connection before it must re-authenticate (KIP-368; 0: no limit).",
        type=LONG,
        group="security",
    )
    connection_failed_authentication_delay_ms: int = setting(
        "connection.failed.authentication.delay.ms",
        100,
        "How long the answer to a failed authentication is delayed.",
        validator=Range.at_least(0),
        group="security",
    )
    connections_max_idle_ms: int = setting(
        "connections.max.idle.ms",
        600000,
        "Idle connections are closed after this long (-1: never).",
        type=LONG,
        validator=Range.at_least(-1),
        group="network",
    )
    max_connections: int = setting(
        "max.connections",
        INT_MAX,
        "Most connections the broker accepts at once.",
        validator=Range.at_least(0),
        group="network",
    )
    max_connections_per_ip: int = setting(
        "max.connections.per.ip",
        INT_MAX,
        "Most connections from one address.",
        validator=Range.at_least(0),
        group="network",
    )
    max_connections_per_ip_overrides: str = setting(
        "max.connections.per.ip.overrides",
        "",
        "Per-address limits, HOST:COUNT pairs separated by commas.",
        group="network",
    )
    max_connection_creation_rate: int = setting(
        "max.connection.creation.rate",
        INT_MAX,
        "Most new connections per second (per listener with the listener.name. prefix).",
        validator=Range.at_least(0),
        group="network",
    )
    quota_window_num: int = setting(
        "quota.window.num",
        11,
        "Samples in the window of max.connection.creation.rate.",
        validator=Range.at_least(1),
        group="network",
    )
    quota_window_size_seconds: int = setting(
        "quota.window.size.seconds",
        1,
        "Length of one sample of max.connection.creation.rate.",
        validator=Range.at_least(1),
        group="network",
    )
    authorizer_class_name: str = setting(
        "authorizer.class.name",
        "",
        "The authorizer (Kafka's StandardAuthorizer class name turns ACLs on); empty: none.",
        importance=HIGH,
        group="security",
    )
    super_users: str = setting(
        "super.users",
        "",
        "Principals allowed everything, separated by semicolons.",
        group="security",
    )
    allow_everyone_if_no_acl_found: bool = setting(
        "allow.everyone.if.no.acl.found",
        False,
        "A resource with no ACL is open to everyone.",
        group="security",
    )
    offsets_load_buffer_size: int = setting(
        "offsets.load.buffer.size",
        5242880,
        "Kafka's coordinator load buffer: accepted (a single node loads its logs whole).",
        validator=Range.at_least(1),
        importance=LOW,
        group="compatibility",
    )
    offsets_commit_timeout_ms: int = setting(
        "offsets.commit.timeout.ms",
        5000,
        "Kafka's offset commit timeout: accepted (commits are appended with acks=all semantics).",
        validator=Range.at_least(1),
        importance=LOW,
        group="compatibility",
    )
    offsets_commit_required_acks: int = setting(
        "offsets.commit.required.acks",
        -1,
        "Kafka's offset commit acks: accepted (commits are appended with acks=all semantics).",
        importance=LOW,
        group="compatibility",
    )
    offsets_topic_compression_codec: int = setting(
        "offsets.topic.compression.codec",
        0,
        "Kafka's __consumer_offsets compression: accepted, not used.",
        importance=LOW,
        group="compatibility",
    )
    transaction_state_log_load_buffer_size: int = setting(
        "transaction.state.log.load.buffer.size",
        5242880,
        "Kafka's coordinator load buffer: accepted (a single node loads its logs whole).",
        validator=Range.at_least(1),
        importance=LOW,
        group="compatibility",
    )
    metrics_listener: str = setting(
        "metrics.listener",
        "",
        "The HTTP listener, HOST:PORT: Prometheus metrics at /metrics and the web console at /; empty: off.",
        group="http",
    )
    console_allow_abort: bool = setting(
        "console.allow.abort",
        False,
        "The web console may abort hanging transactions (POST /console/abort is 403 otherwise).",
        group="http",
    )
    metrics_listener_allowed_hosts: str = setting(
        "metrics.listener.allowed.hosts",
        "",
        "Host names the HTTP listener answers to besides its own and loopback's (DNS rebinding defence), comma-separated.",
        group="http",
    )
    metrics_listener_authentication: str = setting(
        "metrics.listener.authentication",
        "none",
        "none (callers are User:ANONYMOUS) or basic (HTTP basic authentication as a user of the SASL listeners); with an authorizer, the caller's ACLs apply.",
        validator=OneOf("none", "basic"),
        group="http",
    )
    oncelog_flush_on_ack: bool = setting(
        "oncelog.flush.on.ack",
        False,
        "acks=all produces, coordinator records and transaction markers are answered only after an fdatasync of what they wrote.",
        importance=HIGH,
        group="durability",
    )
    oncelog_loop_stall_warn_ms: int = setting(
        "oncelog.loop.stall.warn.ms",
        500,
        "The event-loop watchdog logs a loop held this long, with the stack that holds it; 0: no watchdog thread.",
        validator=Range.at_least(0),
        group="durability",
    )
