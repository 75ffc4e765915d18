"""Every Kafka API the broker serves, collected from the one module per API.

Only versions whose semantics are fully implemented are declared: a client picks
the highest version both sides support, so advertising a version we only parse
would silently change behaviour. ApiVersions answers from this registry.
"""

from __future__ import annotations

from oncelog.broker.apis import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    alter_user_scram_credentials,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_producers,
    describe_topic_partitions,
    describe_transactions,
    describe_user_scram_credentials,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    produce,
    sasl_authenticate,
    sasl_handshake,
    sync_group,
    txn_offset_commit,
    write_txn_markers,
)
from oncelog.broker.apis.spec import ApiSpec

API_SPECS: tuple[ApiSpec, ...] = tuple(
    module.API
    for module in (
        produce,
        fetch,
        list_offsets,
        metadata,
        offset_commit,
        offset_fetch,
        find_coordinator,
        join_group,
        heartbeat,
        leave_group,
        sync_group,
        describe_groups,
        list_groups,
        api_versions,
        create_topics,
        delete_topics,
        delete_records,
        init_producer_id,
        add_partitions_to_txn,
        add_offsets_to_txn,
        end_txn,
        write_txn_markers,
        txn_offset_commit,
        describe_configs,
        alter_configs,
        create_partitions,
        delete_groups,
        incremental_alter_configs,
        offset_delete,
        describe_cluster,
        describe_producers,
        describe_transactions,
        list_transactions,
        describe_topic_partitions,
        consumer_group_heartbeat,
        consumer_group_describe,
        sasl_handshake,
        sasl_authenticate,
        describe_user_scram_credentials,
        alter_user_scram_credentials,
        describe_acls,
        create_acls,
        delete_acls,
    )
)


def build_registry(specs: tuple[ApiSpec, ...] = API_SPECS) -> dict[int, ApiSpec]:
    """API key -> spec; two modules claiming one key is a programming error."""
    registry: dict[int, ApiSpec] = {}
    for spec in specs:
        if spec.key in registry:
            raise ValueError(f"API {spec.key.name} is declared twice")
        registry[spec.key] = spec
    return registry
