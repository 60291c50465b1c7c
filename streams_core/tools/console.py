"""The console tools, after Kafka's `kafka-console-producer` and `kafka-console-consumer`.

    python -m streams_core.tools produce TOPIC --bootstrap-servers B [--parse-key] [--key-separator SEP]
        [--key-serde NAME] [--value-serde NAME] [--null-marker TEXT]          (lines on standard input)
    python -m streams_core.tools consume TOPIC --bootstrap-servers B [--from-beginning]
        [--max-messages N] [--timeout-ms T] [--print-key] [--print-timestamp] [--key-separator SEP]
        [--key-serde NAME] [--value-serde NAME]
    both also [--command-config FILE]   (client properties for a secured cluster; docs/security.md)

Serdes are named as `default.key.serde` takes them (`string`, `long`, `integer`, `double`,
`json`, `bytes`): `produce` parses each key and value from its text (`long`: an integer, `json`:
a JSON document) and writes the serde's bytes, so an application reading with `Serdes.Long()` or
`Serdes.Json()` gets the values typed; `consume` decodes with the serdes and prints `null` for a
None value, Long values as numbers, JSON values as compact JSON. As Kafka's tools: the key
separator is a tab, a line without `--parse-key` has no key, records go to the partition the
key's murmur2 picks, and the consumer reads without a group (every partition, from the end
unless `--from-beginning`) until `--max-messages` or `--timeout-ms` without a record.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import IO, Any

from streams_core import clients
from streams_core.config import StreamsConfig
from streams_core.errors import ConfigError, StreamsError
from streams_core.serde import Serde, Serdes, resolve_serde
from streams_core.tools.command_config import add_command_config_argument, client_properties
from streams_core.tools.topics import CONNECT_TIMEOUT_S, KafkaUnreachableError

__all__ = ["consume", "format_value", "main_consume", "main_produce", "parse_value", "produce"]


def parse_value(serde: Serde[Any], text: str) -> Any:
    """The value the text stands for under `serde` (`long`: an integer, `json`: a JSON document...)."""
    if serde is Serdes.Long() or serde is Serdes.Integer():
        return int(text)
    if serde is Serdes.Double():
        return float(text)
    if serde is Serdes.Json():
        return json.loads(text)
    if serde is Serdes.Bytes():
        return text.encode("utf-8")
    return text


def format_value(value: Any) -> str:
    """How the consumer prints a decoded key or value (None as `null`, JSON compact)."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _config(bootstrap_servers: str, client_config: Mapping[str, Any] | None) -> StreamsConfig:
    return StreamsConfig({**(client_config or {}), "bootstrap.servers": bootstrap_servers}, required=("bootstrap.servers",))


async def produce(
    bootstrap_servers: str,
    topic: str,
    lines: Iterable[str],
    key_serde: Serde[Any],
    value_serde: Serde[Any],
    *,
    parse_key: bool = False,
    key_separator: str = "\t",
    null_marker: str | None = None,
    client_config: Mapping[str, Any] | None = None,
) -> int:
    """Send one record per line (blank lines skipped); returns how many were sent and acknowledged."""
    records: list[tuple[bytes | None, bytes | None]] = []
    for number, line in enumerate(lines, 1):
        line = line.rstrip("\r\n")
        if not line:
            continue
        key_text: str | None = None
        if parse_key:
            key_text, sep, line = line.partition(key_separator)
            if not sep:
                raise StreamsError(f"line {number}: no key separator {key_separator!r} (--parse-key): {key_text!r}")
        try:
            key = None if key_text is None else key_serde.serialize(topic, parse_value(key_serde, key_text))
            value = None if line == null_marker else value_serde.serialize(topic, parse_value(value_serde, line))
        except ValueError as exc:  # json.JSONDecodeError and int() are ValueErrors
            raise StreamsError(f"line {number}: cannot read {line!r} with {value_serde!r}: {exc}") from exc
        records.append((key, value))
    producer = clients.create_producer(_config(bootstrap_servers, client_config), client_id="streams-core-console-producer")
    try:
        await asyncio.wait_for(producer.start(), CONNECT_TIMEOUT_S)
    except Exception as exc:
        await producer.stop()
        raise KafkaUnreachableError(f"cannot reach Kafka at {bootstrap_servers} ({exc!r})") from exc
    try:
        sent = [await producer.send(topic, value, key=key) for key, value in records]
        await asyncio.gather(*sent)
    finally:
        await producer.stop()
    return len(records)


async def consume(
    bootstrap_servers: str,
    topic: str,
    key_serde: Serde[Any],
    value_serde: Serde[Any],
    out: IO[str],
    *,
    from_beginning: bool = False,
    max_messages: int | None = None,
    timeout_ms: int | None = None,
    print_key: bool = False,
    print_timestamp: bool = False,
    key_separator: str = "\t",
    client_config: Mapping[str, Any] | None = None,
) -> int:
    """Print the topic's records to `out` as they come; returns how many were printed."""
    from streams_core.tools.topics import admin_client

    async with admin_client({**(client_config or {}), "bootstrap.servers": bootstrap_servers}) as admin:
        counts = await clients.InternalTopicManager(admin).partition_counts([topic])
    if counts.get(topic) is None:
        raise StreamsError(f"topic {topic!r} does not exist")
    partitions = [clients.KafkaTopicPartition(topic, p) for p in range(counts[topic] or 0)]
    consumer = clients.create_global_consumer(_config(bootstrap_servers, client_config), client_id="streams-core-console-consumer")
    await asyncio.wait_for(consumer.start(), CONNECT_TIMEOUT_S)
    printed = 0
    loop = asyncio.get_running_loop()
    try:
        consumer.assign(partitions)
        await (consumer.seek_to_beginning(*partitions) if from_beginning else consumer.seek_to_end(*partitions))
        last = loop.time()
        while max_messages is None or printed < max_messages:
            batches = await consumer.getmany(timeout_ms=200)
            now = loop.time()
            if not batches and timeout_ms is not None and (now - last) * 1000 >= timeout_ms:
                break
            for record in (r for tp in sorted(batches, key=lambda tp: tp.partition) for r in batches[tp]):
                if max_messages is not None and printed >= max_messages:
                    break
                out.write(_line(topic, record, key_serde, value_serde, print_key, print_timestamp, key_separator))
                printed += 1
            if batches:
                out.flush()
                last = now
    finally:
        await consumer.stop()
    return printed


def _line(topic: str, record: Any, key_serde: Serde[Any], value_serde: Serde[Any], print_key: bool,
          print_timestamp: bool, separator: str) -> str:  # fmt: skip
    fields: list[str] = []
    if print_timestamp:
        fields.append(f"CreateTime:{record.timestamp}")
    if print_key:
        fields.append(format_value(None if record.key is None else key_serde.deserialize(topic, record.key)))
    fields.append(format_value(None if record.value is None else value_serde.deserialize(topic, record.value)))
    return separator.join(fields) + "\n"


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topic", metavar="TOPIC")
    parser.add_argument("--bootstrap-servers", "--bootstrap-server", required=True, metavar="B",
                        help="host:port of the Kafka cluster")  # fmt: skip
    parser.add_argument("--key-serde", default="string", metavar="NAME", help="string (default), long, integer, double, json, bytes")
    parser.add_argument("--value-serde", default="string", metavar="NAME", help="string (default), long, integer, double, json, bytes")
    parser.add_argument("--key-separator", default="\t", metavar="SEP", help="between key and value (default: a tab)")
    add_command_config_argument(parser)


def _serdes(args: argparse.Namespace) -> tuple[Serde[Any], Serde[Any]]:
    return resolve_serde(args.key_serde, "--key-serde"), resolve_serde(args.value_serde, "--value-serde")


def _run(coroutine: Any) -> int:
    try:
        asyncio.run(coroutine)
    except (StreamsError, ConfigError, ValueError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    except clients.KafkaError as exc:
        sys.stderr.write(f"error: Kafka refused the request: {exc}\n")
        return 1
    return 0


def main_produce(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streams_core.tools produce",
                                     description="Send the lines of standard input to a topic (as kafka-console-producer).")  # fmt: skip
    _common(parser)
    parser.add_argument("--parse-key", action="store_true", help="each line is KEY<separator>VALUE (else VALUE, no key)")
    parser.add_argument("--null-marker", default=None, metavar="TEXT", help="a value written as TEXT is a tombstone (None)")
    args = parser.parse_args(argv)
    try:
        key_serde, value_serde = _serdes(args)
    except ConfigError as exc:
        parser.error(str(exc))
    return _run(produce(args.bootstrap_servers, args.topic, sys.stdin, key_serde, value_serde, parse_key=args.parse_key,
                        key_separator=args.key_separator, null_marker=args.null_marker,
                        client_config=client_properties(args)))  # fmt: skip


def main_consume(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streams_core.tools consume",
                                     description="Print a topic's records (as kafka-console-consumer).")  # fmt: skip
    _common(parser)
    parser.add_argument("--from-beginning", action="store_true", help="start at the earliest offset (else the end)")
    parser.add_argument("--max-messages", type=int, default=None, metavar="N", help="stop after N records")
    parser.add_argument("--timeout-ms", type=int, default=None, metavar="T", help="stop after T ms without a record")
    parser.add_argument("--print-key", action="store_true", help="print KEY<separator>VALUE")
    parser.add_argument("--print-timestamp", action="store_true", help="print CreateTime:<ms> first")
    args = parser.parse_args(argv)
    try:
        key_serde, value_serde = _serdes(args)
    except ConfigError as exc:
        parser.error(str(exc))
    return _run(consume(args.bootstrap_servers, args.topic, key_serde, value_serde, sys.stdout,
                        from_beginning=args.from_beginning, max_messages=args.max_messages, timeout_ms=args.timeout_ms,
                        print_key=args.print_key, print_timestamp=args.print_timestamp,
                        key_separator=args.key_separator, client_config=client_properties(args)))  # fmt: skip
