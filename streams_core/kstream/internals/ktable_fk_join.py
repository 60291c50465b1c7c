"""The sub-graph of a foreign-key table-table join, named and wired as Java's `doJoinOnForeignKey`.

    left table -> <name>-subscription-registration-processor -> ...-sink => <name>-subscription-registration-topic
      => ...-source -> <name>-subscription-receive (subscription store) -> <name>-subscription-join-foreign
    right table -> <name>-foreign-join-subscription (subscription store)
      both -> <name>-subscription-response-sink => <name>-subscription-response-topic
      => ...-source -> <name>-subscription-response-resolver -> <name>-result (the result table)

Unnamed, the nodes take Kafka Streams 4.3's generated names (`KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-<n>`,
`KTABLE-SINK-<n>`, `KTABLE-SOURCE-<n>`, ...), burning indices as it does (checked against its
`describe()`); the result table has a store only when named or needed downstream. The registration topic is co-partitioned with the right
table, the response topic with the left one; a response goes to the partition its
subscription came from.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streams_core.kstream.internals import names
from streams_core.kstream.internals.foreign_key_join import (
    ForeignTableJoin,
    ResponseJoin,
    SubscriptionJoin,
    SubscriptionReceive,
    SubscriptionResponseWrapperSerde,
    SubscriptionSend,
    SubscriptionWrapperSerde,
)
from streams_core.kstream.internals.functions import check_callable, with_key
from streams_core.kstream.internals.ktable_processors import KTableSource
from streams_core.kstream.internals.ktable_value_getters import StoreValueGetterSupplier
from streams_core.kstream.internals.materialize import key_value_store, store_name
from streams_core.kstream.internals.send_old_values import SendOldValues
from streams_core.kstream.internals.value_and_timestamp import ValueAndTimestampSerde
from streams_core.kstream.materialized import Materialized
from streams_core.kstream.table_joined import TableJoined
from streams_core.processor.timestamp_extractor import FailOnInvalidTimestamp
from streams_core.processor.type_vars import KO, VO, VR, K, V
from streams_core.serde import Serdes
from streams_core.state.stores import Stores

if TYPE_CHECKING:
    from streams_core.kstream.ktable import KTable

__all__ = ["foreign_key_join"]

FK_JOIN = "KTABLE-FK-JOIN-"
SUBSCRIPTION_REGISTRATION = FK_JOIN + "SUBSCRIPTION-REGISTRATION-"
SUBSCRIPTION_RESPONSE = FK_JOIN + "SUBSCRIPTION-RESPONSE-"
SUBSCRIPTION_PROCESSOR = FK_JOIN + "SUBSCRIPTION-PROCESSOR-"
SUBSCRIPTION_RESPONSE_RESOLVER = FK_JOIN + "SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-"
STATE_STORE = FK_JOIN + "SUBSCRIPTION-STATE-STORE-"
OUTPUT = FK_JOIN + "OUTPUT-"
TOPIC_SUFFIX = "-topic"

_RECORD_TIMESTAMP = FailOnInvalidTimestamp()


def _response_partition(topic: str, key: Any, value: Any, num_partitions: int) -> int | None:
    """The partition of the left record the response answers (Java's default response partitioner)."""
    partition = value.primary_partition
    return None if partition is None else int(partition) % num_partitions


def _key_only(partitioner: Any) -> Callable[[str, Any, Any, int], int | None]:
    """A TableJoined partitioner sees the key only, as Java's (the value is a wrapper)."""

    def partition(topic: str, key: Any, value: Any, num_partitions: int) -> int | None:
        result: int | None = partitioner(topic, key, None, num_partitions)
        return result

    return partition


def foreign_key_join(
    this: KTable[K, V],
    other: KTable[KO, VO],
    extractor: Callable[..., KO],
    joiner: Callable[[V | None, VO | None], VR],
    left: bool,
    table_joined: TableJoined | None,
    materialized: Materialized | None,
) -> KTable[K, VR]:
    """`this` joined with `other` on `extractor(value)` (or `extractor(key, value)`) as `other`'s key."""
    from streams_core.kstream.ktable import KTable

    check_callable(extractor, "the foreign key extractor")
    check_callable(joiner, "the joiner")
    extract = with_key(extractor, 1, "the foreign key extractor")
    b = this._builder
    tj = table_joined or TableJoined()
    given = tj.name
    other.old_values.enable(True)
    this.old_values.enable(True)
    pk_serde, fk_serde = this.key_serde, other.key_serde
    value_serde = b.bound(this.value_serde) if this.value_serde is not None else None
    wrapper_serde = b.bound(SubscriptionWrapperSerde(pk_serde))
    response_serde = b.bound(SubscriptionResponseWrapperSerde(other.value_serde))

    registration_topic = b.suffixed_name(given, "-subscription-registration", SUBSCRIPTION_REGISTRATION) + TOPIC_SUFFIX
    b.itb.add_internal_topic(registration_topic, None)
    send = b.suffixed_name(given, "-subscription-registration-processor", SUBSCRIPTION_REGISTRATION)
    b.add_processor(send, lambda: SubscriptionSend(extract, fk_serde, value_serde, left), (this.name,))
    registration_sink = b.suffixed_name(given, "-subscription-registration-sink", names.KTABLE_SINK)
    sink_partitioner = None if tj.other_partitioner is None else _key_only(tj.other_partitioner)
    b.itb.add_sink(registration_sink, registration_topic, (send,), fk_serde, wrapper_serde, sink_partitioner)
    registration_source = b.suffixed_name(given, "-subscription-registration-source", names.KTABLE_SOURCE)
    b.itb.add_source(registration_source, (registration_topic,), None, fk_serde, wrapper_serde, _RECORD_TIMESTAMP)
    b.copartition(other.source_nodes | {registration_source})

    subscription_store = b.suffixed_name(given, "-subscription-store", STATE_STORE)
    store_builder = Stores.key_value_store_builder(
        Stores.persistent_key_value_store(subscription_store), Serdes.Bytes(), b.bound(ValueAndTimestampSerde(wrapper_serde))
    ).with_caching_disabled()
    receive = b.suffixed_name(given, "-subscription-receive", SUBSCRIPTION_PROCESSOR)
    b.add_processor(receive, lambda: SubscriptionReceive(subscription_store, fk_serde, pk_serde), (registration_source,),
                    stores=(store_builder,))  # fmt: skip
    other_getter = other._value_getter("a foreign-key join")
    other.old_values.materialize()
    join_foreign = b.suffixed_name(given, "-subscription-join-foreign", SUBSCRIPTION_PROCESSOR)
    b.add_processor(join_foreign, lambda: SubscriptionJoin(other_getter), (receive,), connected=other_getter.store_names)
    foreign_join = b.suffixed_name(given, "-foreign-join-subscription", SUBSCRIPTION_PROCESSOR)
    b.add_processor(foreign_join, lambda: ForeignTableJoin(subscription_store, fk_serde, pk_serde), (other.name,),
                    connected=(subscription_store,))  # fmt: skip

    response_topic = b.suffixed_name(given, "-subscription-response", SUBSCRIPTION_RESPONSE) + TOPIC_SUFFIX
    b.itb.add_internal_topic(response_topic, None)
    response_sink = b.suffixed_name(given, "-subscription-response-sink", names.KTABLE_SINK)
    response_partitioner = _response_partition if tj.partitioner is None else _key_only(tj.partitioner)
    b.itb.add_sink(response_sink, response_topic, (join_foreign, foreign_join), pk_serde, response_serde,
                   response_partitioner)  # fmt: skip
    response_source = b.suffixed_name(given, "-subscription-response-source", names.KTABLE_SOURCE)
    b.itb.add_source(response_source, (response_topic,), None, pk_serde, response_serde, _RECORD_TIMESTAMP)
    b.copartition(this.source_nodes | {response_source})

    this_getter = this._value_getter("a foreign-key join")
    this.old_values.materialize()
    resolver = b.suffixed_name(given, "-subscription-response-resolver", SUBSCRIPTION_RESPONSE_RESOLVER)
    b.add_processor(resolver, lambda: ResponseJoin(this_getter, value_serde, joiner, left), (response_source,),
                    connected=this_getter.store_names)  # fmt: skip
    result = b.suffixed_name(given, "-result", OUTPUT)
    m = (materialized or Materialized()).merged_serdes(pk_serde, b.infer(this.value_serde, "value"))
    store = store_name(b, materialized, OUTPUT)
    result_store = key_value_store(b, store, m, m.key_serde, m.value_serde)
    old_values = SendOldValues("source", m.store_name is not None)  # a store only when named or needed, as Java
    b.add_processor(result, lambda: KTableSource(store if old_values.materialized else None), (resolver,))
    b.deferred_store(result, result_store, old_values)
    return KTable(b, result, m.key_serde, m.value_serde, frozenset({response_source}) | this.source_nodes,
                  StoreValueGetterSupplier(store), store, queryable=m.store_name, old_values=old_values)  # fmt: skip
