"""Foreign-key table-table joins (KIP-213): the wrappers, their serdes and the five processors.

The left table's `SubscriptionSend` sends, keyed by the extracted foreign key, a subscription
(a hash of the left value, an instruction, the primary key and its partition) through the
registration topic to the right table's tasks. There `SubscriptionReceive` keeps it in the
subscription store under (foreign key, primary key) and `SubscriptionJoin` answers with the
right value; `ForeignTableJoin` answers every subscriber of a foreign key when the right
table changes. Answers go back through the response topic, to the primary key's partition,
where `ResponseJoin` drops answers whose hash no longer matches the left value (stale) and
joins the rest. The instructions and their rules are Kafka Streams 4.3's
(SubscriptionSendProcessorSupplier and friends, checked against its sources and driver); the
hash is a 128-bit BLAKE2b, not Java's Murmur3 (only ours reads it).
"""

from __future__ import annotations

import hashlib
import logging
import struct
from collections.abc import Callable
from enum import IntEnum
from typing import Any, Generic, NamedTuple, TypeVar

from streams_core.common.change import Change
from streams_core.common.store import KeyValueStore
from streams_core.errors import DeserializationError
from streams_core.kstream.internals.dsl_serde import WrappingSerde
from streams_core.kstream.internals.ktable_value_getters import ValueGetterSupplier
from streams_core.kstream.internals.value_and_timestamp import ValueAndTimestamp
from streams_core.processor.processor import ProcessorContext, Record
from streams_core.processor.type_vars import KO, KR, VO, VR, K, V
from streams_core.serde import Serde

__all__ = [
    "ForeignTableJoin",
    "Instruction",
    "ResponseJoin",
    "SubscriptionJoin",
    "SubscriptionReceive",
    "SubscriptionResponseWrapper",
    "SubscriptionResponseWrapperSerde",
    "SubscriptionSend",
    "SubscriptionWrapper",
    "SubscriptionWrapperSerde",
    "combined_key",
]

log = logging.getLogger(__name__)


class Instruction(IntEnum):
    """What the right side does with a subscription (Java's SubscriptionWrapper.Instruction)."""

    DELETE_KEY_NO_PROPAGATE = 0
    DELETE_KEY_AND_PROPAGATE = 1
    PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE = 2
    PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE = 3


class SubscriptionWrapper(NamedTuple):
    hash: bytes | None
    instruction: Instruction
    primary_key: Any
    primary_partition: int | None


class SubscriptionResponseWrapper(NamedTuple):
    original_value_hash: bytes | None
    foreign_value: Any
    primary_partition: int | None


_NO_PARTITION = -1


def _pack_hash(value_hash: bytes | None) -> bytes:
    return b"\x00" if value_hash is None else b"\x01" + value_hash


def _unpack_hash(data: bytes, offset: int) -> tuple[bytes | None, int]:
    if data[offset] == 0:
        return None, offset + 1
    return data[offset + 1 : offset + 17], offset + 17


class SubscriptionWrapperSerde(WrappingSerde[SubscriptionWrapper]):
    """version 0 | instruction | hash flag (+16 bytes) | primary partition (int32, -1: none) | primary key."""

    name = "SubscriptionWrapper"
    role = "key"

    def serialize(self, topic: str | None, data: SubscriptionWrapper | None) -> bytes | None:
        if data is None:
            return None
        partition = _NO_PARTITION if data.primary_partition is None else data.primary_partition
        key = self.inner.serialize(topic, data.primary_key) or b""
        return bytes((0, int(data.instruction))) + _pack_hash(data.hash) + struct.pack(">i", partition) + key

    def deserialize(self, topic: str | None, data: bytes | None) -> SubscriptionWrapper | None:
        if data is None:
            return None
        if len(data) < 7 or data[0] != 0:
            raise DeserializationError("not a version-0 subscription wrapper")
        value_hash, offset = _unpack_hash(data, 2)
        (partition,) = struct.unpack_from(">i", data, offset)
        key = self.inner.deserialize(topic, data[offset + 4 :])
        return SubscriptionWrapper(value_hash, Instruction(data[1]), key,
                                   None if partition == _NO_PARTITION else partition)  # fmt: skip


class SubscriptionResponseWrapperSerde(WrappingSerde[SubscriptionResponseWrapper]):
    """version 0 | hash flag (+16 bytes) | primary partition (int32) | value flag | foreign value."""

    name = "SubscriptionResponseWrapper"
    role = "value"

    def serialize(self, topic: str | None, data: SubscriptionResponseWrapper | None) -> bytes | None:
        if data is None:
            return None
        partition = _NO_PARTITION if data.primary_partition is None else data.primary_partition
        value = None if data.foreign_value is None else self.inner.serialize(topic, data.foreign_value)
        body = b"\x00" if value is None else b"\x01" + value
        return b"\x00" + _pack_hash(data.original_value_hash) + struct.pack(">i", partition) + body

    def deserialize(self, topic: str | None, data: bytes | None) -> SubscriptionResponseWrapper | None:
        if data is None:
            return None
        if len(data) < 7 or data[0] != 0:
            raise DeserializationError("not a version-0 subscription response wrapper")
        value_hash, offset = _unpack_hash(data, 1)
        (partition,) = struct.unpack_from(">i", data, offset)
        offset += 4
        value = None if data[offset] == 0 else self.inner.deserialize(topic, data[offset + 1 :])
        return SubscriptionResponseWrapper(value_hash, value, None if partition == _NO_PARTITION else partition)


def combined_key(foreign_key: bytes, primary_key: bytes = b"") -> bytes:
    """The subscription store's key: 4-byte length of the foreign key, its bytes, the primary key's
    (Java's CombinedKeySchema), so that one foreign key's subscribers are one prefix."""
    return struct.pack(">i", len(foreign_key)) + foreign_key + primary_key


def _increment(prefix: bytes) -> bytes:
    """The smallest key after every key starting with `prefix` (Java's `Bytes.increment`)."""
    data = bytearray(prefix)
    for i in range(len(data) - 1, -1, -1):
        if data[i] != 0xFF:
            data[i] += 1
            return bytes(data[: i + 1])
    return bytes(data) + b"\xff"


T = TypeVar("T")

Subscription = ValueAndTimestamp[SubscriptionWrapper]
"""A subscription as stored, with the time it was made."""


def _value_hash(serde: Serde[T], value: T | None) -> bytes | None:
    if value is None:
        return None
    return hashlib.blake2b(serde.serialize(None, value) or b"", digest_size=16).digest()


def _serde(given: Serde[T] | None, fallback: Serde[T]) -> Serde[T]:
    return fallback if given is None else given


class SubscriptionSend(Generic[K, V, KO]):
    """On the left table: a subscription per change, keyed by the foreign key (Java's instructions)."""

    def __init__(
        self, extractor: Callable[[K, V], KO | None], foreign_key_serde: Serde[KO] | None,
        value_serde: Serde[V] | None, left: bool,
    ) -> None:  # fmt: skip
        self._extractor = extractor
        self._foreign_key_serde = foreign_key_serde
        self._value_serde = value_serde
        self._left = left
        self.dropped_records = 0

    def init(self, context: ProcessorContext[KO | None, SubscriptionWrapper]) -> None:
        self._context = context
        self._fk_serde = _serde(self._foreign_key_serde, context.key_serde)
        self._v_serde = _serde(self._value_serde, context.value_serde)

    def close(self) -> None:
        """Nothing to release."""

    def _same(self, one: KO | None, other: KO | None) -> bool:
        return bool(self._fk_serde.serialize(None, one) == self._fk_serde.serialize(None, other))

    def process(self, record: Record[K, Change[V]]) -> None:
        key, (new, old), _, _ = record
        self._hash: tuple[bytes | None] | None = None
        extract = self._extractor
        old_fk = None if old is None else extract(key, old)
        if self._left:
            if old is None and new is None:
                return  # an idempotent delete
            new_fk = None if new is None else extract(key, new)
            if old_fk is not None and not self._same(new_fk, old_fk):
                self._send(record, old_fk, Instruction.DELETE_KEY_NO_PROPAGATE)
            # always a response, for a left-join result; a None FK subscribes to nothing
            self._send(record, new_fk, Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE)
            return
        if new is None:
            if old_fk is not None:
                self._send(record, old_fk, Instruction.DELETE_KEY_AND_PROPAGATE)
            return
        new_fk = extract(key, new)
        if new_fk is None:
            self._skip()
            if old_fk is not None:
                self._send(record, old_fk, Instruction.DELETE_KEY_AND_PROPAGATE)
        elif old_fk is None:
            self._send(record, new_fk, Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE)
        elif not self._same(new_fk, old_fk):
            self._send(record, old_fk, Instruction.DELETE_KEY_NO_PROPAGATE)
            self._send(record, new_fk, Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE)
        else:
            self._send(record, new_fk, Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE)

    def _send(self, record: Record[K, Change[V]], foreign_key: KO | None, instruction: Instruction) -> None:
        if self._hash is None:
            self._hash = (_value_hash(self._v_serde, record.value.new_value),)
        wrapper = SubscriptionWrapper(self._hash[0], instruction, record.key, self._context.partition)
        self._context.forward(Record(foreign_key, wrapper, record.timestamp, record.headers))

    def _skip(self) -> None:
        self.dropped_records += 1
        context = self._context
        log.debug("FK join: skipping a record with a None foreign key: topic=%s partition=%s offset=%s",
                  context.topic, context.partition, context.offset)  # fmt: skip


class _SubscriptionStoreProcessor(Generic[KO, K, KR, VR]):
    """A right-side processor of the subscription store, keyed by (foreign key, primary key) bytes;
    it forwards records of KR and VR."""

    def __init__(self, store_name: str, foreign_key_serde: Serde[KO] | None, primary_key_serde: Serde[K] | None) -> None:
        self._store_name = store_name
        self._foreign_key_serde = foreign_key_serde
        self._primary_key_serde = primary_key_serde
        self.dropped_records = 0

    def init(self, context: ProcessorContext[KR, VR]) -> None:
        self._context = context
        self._store: KeyValueStore[bytes, Subscription] = context.get_state_store(self._store_name)
        self._fk_serde = _serde(self._foreign_key_serde, context.key_serde)
        self._pk_serde = _serde(self._primary_key_serde, context.key_serde)

    def close(self) -> None:
        """The store is closed by the task."""


class SubscriptionReceive(_SubscriptionStoreProcessor[KO, K, tuple[KO | None, K], Change[Subscription]]):
    """On the right side: keep (or delete) the subscription, forward Change(new, old) keyed (fk, pk)."""

    def process(self, record: Record[KO | None, SubscriptionWrapper]) -> None:
        foreign_key, wrapper, timestamp, headers = record
        if foreign_key is None and wrapper.instruction is not Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE:
            self.dropped_records += 1
            return
        new = ValueAndTimestamp(wrapper, timestamp)
        old = None
        if foreign_key is not None:
            store_key = combined_key(self._fk_serde.serialize(None, foreign_key) or b"",
                                     self._pk_serde.serialize(None, wrapper.primary_key) or b"")  # fmt: skip
            old = self._store.get(store_key)
            if wrapper.instruction in (Instruction.DELETE_KEY_AND_PROPAGATE, Instruction.DELETE_KEY_NO_PROPAGATE):
                self._store.delete(store_key)
            else:
                self._store.put(store_key, new)
        self._context.forward(Record((foreign_key, wrapper.primary_key), Change(new, old), timestamp, headers))


class SubscriptionJoin(Generic[KO, K, VO]):
    """Answers a subscription with the right table's value for its foreign key."""

    def __init__(self, getter_supplier: ValueGetterSupplier[KO, VO]) -> None:
        self._getter = getter_supplier.get()

    def init(self, context: ProcessorContext[K, SubscriptionResponseWrapper]) -> None:
        self._context = context
        self._getter.init(context)

    def close(self) -> None:
        """Stores are closed by their tasks."""

    def process(self, record: Record[tuple[KO | None, K], Change[Subscription]]) -> None:
        (foreign_key, primary_key), change, _, headers = record
        subscription: Subscription = change.new_value  # type: ignore[assignment]  # a subscription is never deleted
        wrapper, subscribed_at = subscription
        foreign = None if foreign_key is None else self._getter.get(foreign_key)
        timestamp = subscribed_at if foreign is None else max(subscribed_at, foreign.timestamp)
        instruction = wrapper.instruction
        if instruction is Instruction.DELETE_KEY_NO_PROPAGATE:
            return
        if instruction is Instruction.DELETE_KEY_AND_PROPAGATE:
            value = None
        elif instruction is Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE:
            value = None if foreign is None else foreign.value
        elif foreign is None:
            return
        else:
            value = foreign.value
        response = SubscriptionResponseWrapper(wrapper.hash, value, wrapper.primary_partition)
        self._context.forward(Record(primary_key, response, timestamp, headers))


class ForeignTableJoin(_SubscriptionStoreProcessor[KO, K, K | None, SubscriptionResponseWrapper], Generic[KO, K, VO]):
    """On the right table: answer every subscriber of the changed foreign key."""

    def process(self, record: Record[KO, Change[VO]]) -> None:
        foreign_key, change, timestamp, headers = record
        if foreign_key is None:
            self.dropped_records += 1
            return
        prefix = combined_key(self._fk_serde.serialize(None, foreign_key) or b"")
        upper = _increment(prefix)
        forward = self._context.forward
        for store_key, subscribed in list(self._store.range(prefix, upper)):
            if not store_key.startswith(prefix):
                continue
            wrapper: SubscriptionWrapper = subscribed.value
            primary_key = self._pk_serde.deserialize(None, store_key[len(prefix) :])
            response = SubscriptionResponseWrapper(wrapper.hash, change.new_value, wrapper.primary_partition)
            forward(Record(primary_key, response, timestamp, headers))


class ResponseJoin(Generic[K, V, VO, VR]):
    """On the left table's tasks: join an answer with the current left value, unless it is stale."""

    def __init__(
        self, getter_supplier: ValueGetterSupplier[K, V], value_serde: Serde[V] | None,
        joiner: Callable[[V | None, VO | None], VR], left: bool,
    ) -> None:  # fmt: skip
        self._getter = getter_supplier.get()
        self._value_serde = value_serde
        self._joiner = joiner
        self._left = left
        self.dropped_records = 0

    def init(self, context: ProcessorContext[K, VR | None]) -> None:
        self._context = context
        self._getter.init(context)
        self._v_serde = _serde(self._value_serde, context.value_serde)

    def close(self) -> None:
        """Stores are closed by their tasks."""

    def process(self, record: Record[K, SubscriptionResponseWrapper]) -> None:
        key, response, _, _ = record
        current = self._getter.get(key)
        current_hash = None if current is None else _value_hash(self._v_serde, current.value)
        if current_hash != response.original_value_hash:
            self.dropped_records += 1
            log.debug("FK join: dropping a stale response for key %r", key)
            return
        if response.foreign_value is None and (not self._left or current is None):
            result = None
        else:
            result = self._joiner(None if current is None else current.value, response.foreign_value)
        self._context.forward(record.with_value(result))
