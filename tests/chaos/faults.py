"""Faults shared by the reliability tests and their full-size runner (bench/chaos/faults.py).

- Damage to a stopped instance's task directory (`DAMAGES`): each function takes a task directory
  `state.dir/<application.id>/<task id>` and damages it as a disk, an operator or a crash could:
  the SQLite file deleted, truncated or overwritten, the `.checkpoint` corrupted or pointing past
  the changelog's end. `expect_full_restore` says whether the restart must notice and rebuild
  the task from the whole changelog (True) or may trust the checkpoint (False).
- Poison input (`poison_record`, `produce_input`): undecodable bytes, malformed JSON, JSON of the
  wrong shape and negative timestamps among good lines, for the word count with JSON values of
  `json_word_count`; `Input` keeps the truth and where each bad record landed.
"""

from __future__ import annotations

import json
import random
import sqlite3
import struct
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer

from streams_core import Materialized, Serdes, StreamsBuilder, Topology
from streams_core.state.internals.offset_checkpoint import CHECKPOINT_FILE_NAME, OffsetCheckpoint
from tests.kafka_utils import create_topic, unique_topic

__all__ = [
    "DAMAGES",
    "POISON_KINDS",
    "STALE_KEY",
    "Damage",
    "Input",
    "Poison",
    "json_word_count",
    "poison_record",
    "produce_input",
    "text_value",
]

STORE_FILE = "counts.sqlite"
STALE_KEY = "stale-key"
"""A row planted in a store whose checkpoint points past the changelog: it must not survive."""


@dataclass(frozen=True)
class Damage:
    """One way to damage a task directory, and whether the restart must rebuild it from scratch."""

    name: str
    apply: Callable[[Path, random.Random], None]
    expect_full_restore: bool


def _store(task_dir: Path) -> Path:
    return task_dir / STORE_FILE


def _delete_store_file(task_dir: Path, rnd: random.Random) -> None:
    _store(task_dir).unlink()


def _truncate_store_to_zero(task_dir: Path, rnd: random.Random) -> None:
    _store(task_dir).write_bytes(b"")


def _truncate_store_to_half(task_dir: Path, rnd: random.Random) -> None:
    data = _store(task_dir).read_bytes()
    _store(task_dir).write_bytes(data[: len(data) // 2])


def _overwrite(task_dir: Path, start: int, garbage: bytes) -> None:
    path = _store(task_dir)
    data = bytearray(path.read_bytes())
    assert start + len(garbage) <= len(data), f"{path} has {len(data)} bytes"
    data[start : start + len(garbage)] = garbage
    path.write_bytes(bytes(data))


def _garbage_in_header(task_dir: Path, rnd: random.Random) -> None:
    """Random bytes over the 100-byte database header (the magic string included)."""
    _overwrite(task_dir, 0, rnd.randbytes(100))


def _garbage_in_middle(task_dir: Path, rnd: random.Random) -> None:
    """32 random bytes at a random place in the middle half of the file."""
    size = _store(task_dir).stat().st_size
    _overwrite(task_dir, rnd.randrange(size // 4, 3 * size // 4), rnd.randbytes(32))


def _one_bit_in_a_count(task_dir: Path, rnd: random.Random) -> None:
    """Flip the lowest bit of one stored count: a well-formed file answering one key wrong."""
    data = bytearray(_store(task_dir).read_bytes())
    candidates = [i for i in range(len(data) - 20) if data[i : i + 5] == b"word-"]
    assert candidates, "no key found in the store file (was it checkpointed into the main file?)"
    at = rnd.choice(candidates) + len("word-0000") + 7  # a key, then its 8-byte big-endian count
    data[at] ^= 0x01
    _store(task_dir).write_bytes(bytes(data))


def _checkpoint(task_dir: Path) -> Path:
    return task_dir / CHECKPOINT_FILE_NAME


def _checkpoint_garbage(task_dir: Path, rnd: random.Random) -> None:
    _checkpoint(task_dir).write_bytes(rnd.randbytes(64))


def _checkpoint_truncated(task_dir: Path, rnd: random.Random) -> None:
    text = _checkpoint(task_dir).read_bytes()
    _checkpoint(task_dir).write_bytes(text[: len(text) // 2])


def _checkpoint_wrong_version(task_dir: Path, rnd: random.Random) -> None:
    text = _checkpoint(task_dir).read_text()
    _checkpoint(task_dir).write_text("1" + text[1:])


def _checkpoint_deleted(task_dir: Path, rnd: random.Random) -> None:
    _checkpoint(task_dir).unlink()


def _checkpoint_past_the_end(task_dir: Path, rnd: random.Random) -> None:
    """Offsets 1,000 past the changelog end, and a row the changelog never had.

    What a changelog deleted and recreated (the reset tool without `--local`) leaves: the
    store's rows are not the changelog's.
    """
    checkpoint = OffsetCheckpoint(_checkpoint(task_dir))
    checkpoint.write({tp: offset + 1_000_000 for tp, offset in checkpoint.read().items()})
    connection = sqlite3.connect(_store(task_dir))
    try:
        connection.execute("INSERT OR REPLACE INTO key_value VALUES (?, ?)", (STALE_KEY.encode(), struct.pack(">q", 42)))
        connection.commit()
    finally:
        connection.close()
    _store(task_dir).with_name(STORE_FILE + ".crc32").unlink(missing_ok=True)


def _nothing(task_dir: Path, rnd: random.Random) -> None:
    return None


DAMAGES: dict[str, Damage] = {
    d.name: d
    for d in (
        Damage("none", _nothing, False),
        Damage("sqlite-deleted", _delete_store_file, True),
        Damage("sqlite-truncated-0", _truncate_store_to_zero, True),
        Damage("sqlite-truncated-half", _truncate_store_to_half, True),
        Damage("sqlite-header-garbage", _garbage_in_header, True),
        Damage("sqlite-middle-garbage", _garbage_in_middle, True),
        Damage("sqlite-one-bit-in-a-count", _one_bit_in_a_count, True),
        Damage("checkpoint-garbage", _checkpoint_garbage, True),
        Damage("checkpoint-truncated", _checkpoint_truncated, True),
        Damage("checkpoint-wrong-version", _checkpoint_wrong_version, True),
        Damage("checkpoint-deleted", _checkpoint_deleted, True),
        Damage("checkpoint-past-the-end", _checkpoint_past_the_end, True),
    )
}


# -- poison input ----------------------------------------------------------------------------


def _words(value: bytes) -> list[str]:
    """The value deserializer of the word count: a JSON object with a string `text`, else an error."""
    document = json.loads(value)
    if not isinstance(document, dict) or not isinstance(document.get("text"), str):
        raise ValueError(f"expected an object with a string 'text', got {type(document).__name__}")
    return document["text"].split()


def json_word_count(input_topic: str, output_topic: str, store: str = "word-count") -> Topology:
    """Word count over JSON values `{"text": "..."}` with String keys; a typed JSON serde checks the shape."""
    lines: Any = Serdes.from_functions(lambda words: json.dumps({"text": " ".join(words)}).encode(), _words, name="TextJson")
    builder = StreamsBuilder()
    (
        builder.stream(input_topic, key_serde=Serdes.String(), value_serde=lines)
        .flat_map_values(lambda words: words)
        .group_by(lambda key, word: word, key_serde=Serdes.String(), value_serde=Serdes.String())
        .count(Materialized.as_(store))
        .to_stream()
        .to(output_topic, key_serde=Serdes.String(), value_serde=Serdes.Long())
    )
    return builder.build()


def text_value(words: list[str]) -> bytes:
    return json.dumps({"text": " ".join(words)}).encode()


POISON_KINDS = ("undecodable-key", "undecodable-value", "malformed-json", "wrong-json-shape", "negative-timestamp")


@dataclass(frozen=True)
class Poison:
    """A bad record: its kind, key and value bytes, and timestamp (None: now)."""

    kind: str
    key: bytes
    value: bytes
    timestamp_ms: int | None

    @property
    def deserializable(self) -> bool:
        """Whether the deserialization handler sees it (negative timestamps go to the timestamp extractor)."""
        return self.kind != "negative-timestamp"


def poison_record(kind: str, rnd: random.Random, words: list[str]) -> Poison:
    """A record of `kind`; a negative-timestamp record is otherwise good (its words must not count)."""
    key = f"user-{rnd.randrange(100)}".encode()
    if kind == "undecodable-key":
        return Poison(kind, b"\xff\xfe" + rnd.randbytes(6), text_value(words), None)
    if kind == "undecodable-value":
        return Poison(kind, key, b"\x80" + rnd.randbytes(15), None)
    if kind == "malformed-json":
        return Poison(kind, key, text_value(words)[:-3], None)
    if kind == "wrong-json-shape":
        return Poison(kind, key, json.dumps(rnd.choice([[1, 2], {"text": 5}, "text", None])).encode(), None)
    if kind == "negative-timestamp":
        return Poison(kind, key, text_value(words), -1 - rnd.randrange(1_000_000))
    raise ValueError(kind)


VOCABULARY = [f"w{i:02d}" for i in range(60)]


@dataclass
class Input:
    """An input topic, the word counts of its good records, and where each bad record landed."""

    topic: str
    truth: Counter[str] = field(default_factory=Counter)
    good: int = 0
    bad: dict[tuple[int, int], Poison] = field(default_factory=dict)
    """(partition, offset) -> the poison record there."""

    def first_bad(self) -> dict[int, int]:
        """Per partition, the offset of its first bad record."""
        first: dict[int, int] = {}
        for partition, offset in sorted(self.bad):
            first.setdefault(partition, offset)
        return first


async def produce_input(
    bootstrap: str, total: int, kinds: tuple[str, ...], share: float, seed: int, partitions: int = 2
) -> Input:
    """`total` records, `share` of them poison (cycling through `kinds`), the rest good lines."""
    rnd = random.Random(seed)
    data = Input(unique_topic("poison-in"))
    await create_topic(bootstrap, data.topic, partitions)
    bad_at = set(rnd.sample(range(total), round(total * share)))
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        sent = []
        for i in range(total):
            words = rnd.choices(VOCABULARY, k=rnd.randint(1, 5))
            if i in bad_at:
                poison = poison_record(kinds[len(sent) % len(kinds)], rnd, words)
                future = await producer.send(data.topic, poison.value, key=poison.key, timestamp_ms=poison.timestamp_ms)
                sent.append((future, poison))
            else:
                now = int(time.time() * 1000)
                await producer.send(data.topic, text_value(words), key=f"user-{rnd.randrange(100)}".encode(), timestamp_ms=now)
                data.truth.update(words)
                data.good += 1
        await producer.flush()
        for future, poison in sent:
            meta = await future
            data.bad[(meta.partition, meta.offset)] = poison
    finally:
        await producer.stop()
    return data
