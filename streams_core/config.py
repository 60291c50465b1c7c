"""StreamsConfig: Kafka Streams property names, their defaults and validation.

Keys are the Kafka Streams property names unchanged. An unknown key or an invalid value raises
`ConfigError` naming the key and what it accepts. Values given as strings (environment variables,
property files) are parsed. Client settings pass through with the prefixes Kafka Streams uses
(`consumer.`, `producer.`, `admin.`, `main.consumer.`, `restore.consumer.`, `global.consumer.`)
or bare for the common client keys listed in `CLIENT_KEYS`.
"""

from __future__ import annotations

import difflib
import importlib
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from streams_core.common.config_parsers import choice, integer
from streams_core.errors import ConfigError
from streams_core.serde import Serde, Serdes, resolve_serde

__all__ = [
    "CLIENT_KEYS",
    "CLIENT_PREFIXES",
    "MERGE_REPARTITION_TOPICS",
    "OPTIMIZATION",
    "REUSE_KTABLE_SOURCE_TOPICS",
    "TOPIC_PREFIX",
    "StreamsConfig",
    "is_secret",
    "optimization",
    "redacted",
    "topology_optimizations",
]

AT_LEAST_ONCE = "at_least_once"
EXACTLY_ONCE = "exactly_once"
EXACTLY_ONCE_V2 = "exactly_once_v2"

CLIENT_PREFIXES = (
    "consumer.",
    "producer.",
    "admin.",
    "main.consumer.",
    "restore.consumer.",
    "global.consumer.",
)

TOPIC_PREFIX = "topic."
"""Kafka Streams' `topic.` prefix: configs for every internal topic it creates (`StreamsConfig.TOPIC_PREFIX`),
above the library's defaults and below a store's own log config."""

# Client settings accepted without a prefix (applied to every client that knows them).
CLIENT_KEYS = frozenset(
    {
        "client.id",
        "security.protocol",
        "sasl.mechanism",
        "sasl.plain.username",
        "sasl.plain.password",
        "sasl.jaas.config",
        "sasl.oauth.token.provider",
        "ssl.cafile",
        "ssl.capath",
        "ssl.certfile",
        "ssl.keyfile",
        "ssl.password",
        "request.timeout.ms",
        "retry.backoff.ms",
        "metadata.max.age.ms",
        "connections.max.idle.ms",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "max.poll.interval.ms",
        "max.poll.records",
        "fetch.max.wait.ms",
        "fetch.max.bytes",
        "max.partition.fetch.bytes",
        "auto.offset.reset",
        "linger.ms",
        "acks",
        "compression.type",
        "max.batch.size",
        "max.request.size",
        "transaction.timeout.ms",
    }
)

_SECRET_SUFFIXES = ("password", "sasl.jaas.config", "ssl.keystore.key")


def is_secret(key: str) -> bool:
    """A key whose value must never be shown: passwords, JAAS configs (they hold passwords), keys."""
    return key.endswith(_SECRET_SUFFIXES)


def redacted(props: Mapping[str, Any]) -> dict[str, Any]:
    """`props` with secret values replaced by `[hidden]`, for logs, errors and repr."""
    return {k: "[hidden]" if is_secret(k) else v for k, v in props.items()}


_DESERIALIZATION_HANDLERS = ("log_and_fail", "log_and_continue", "dead_letter")
_PRODUCTION_HANDLERS = ("fail", "continue")


@dataclass(frozen=True, slots=True)
class _Key:
    """One Kafka Streams property: its default and the parser that validates a given value."""

    name: str
    default: Any
    parse: Callable[[str, Any], Any]
    doc: str


_int = integer


def _choice(*choices: str) -> Callable[[str, Any], str]:
    """One of `choices`, in any case, with `-` for `_` (`exactly-once` is `exactly_once`)."""
    return choice(*choices, normalize=_lower_underscored)


def _lower_underscored(text: str) -> str:
    return text.lower().replace("-", "_")


OPTIMIZATION = "topology.optimization"
NO_OPTIMIZATION = "none"
OPTIMIZE = "all"
REUSE_KTABLE_SOURCE_TOPICS = "reuse.ktable.source.topics"
MERGE_REPARTITION_TOPICS = "merge.repartition.topics"
SINGLE_STORE_SELF_JOIN = "single.store.self.join"
_OPTIMIZATIONS = (OPTIMIZE, REUSE_KTABLE_SOURCE_TOPICS, MERGE_REPARTITION_TOPICS, SINGLE_STORE_SELF_JOIN)
_IMPLEMENTED_OPTIMIZATIONS = (REUSE_KTABLE_SOURCE_TOPICS, MERGE_REPARTITION_TOPICS, SINGLE_STORE_SELF_JOIN)


def _split_optimizations(value: Any) -> list[str]:
    return [part.strip() for part in str(value).strip().lower().split(",")]


def optimization(key: str, value: Any) -> str:
    """Kafka's `verifyTopologyOptimizationConfigs`: `none`, `all`, or a comma list of single optimizations."""
    asked = _split_optimizations(value)
    if (NO_OPTIMIZATION in asked or OPTIMIZE in asked) and len(asked) > 1:
        raise ConfigError(key, f"{value!r} is not a valid optimization config: none or all cannot be listed with others")
    if asked == [NO_OPTIMIZATION] or asked == [OPTIMIZE]:
        return asked[0]
    unknown = [part for part in asked if part not in _OPTIMIZATIONS]
    if unknown:
        raise ConfigError(key, f"expected none, all or a list of {', '.join(_OPTIMIZATIONS[1:])}, got {value!r}")
    return ",".join(dict.fromkeys(asked))


def topology_optimizations(value: Any) -> frozenset[str]:
    """The single optimizations a `topology.optimization` value turns on (`all`: every implemented one)."""
    asked = _split_optimizations(value)
    if OPTIMIZE in asked:
        return frozenset(_IMPLEMENTED_OPTIMIZATIONS)
    return frozenset(part for part in asked if part in _IMPLEMENTED_OPTIMIZATIONS)


def _optional_choice(*choices: str) -> Callable[[str, Any], str | None]:
    strict = _choice(*choices)

    def parse(key: str, value: Any) -> str | None:
        if value is None or value == "":
            return None
        return strict(key, value)

    return parse


def _str(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(key, f"expected a string, got {type(value).__name__}")
    return value


def _required_str(key: str, value: Any) -> str:
    text = _str(key, value).strip()
    if not text:
        raise ConfigError(key, "must not be empty")
    return text


def _path(key: str, value: Any) -> str:
    """A directory given as a string or an `os.PathLike` (pathlib.Path is the usual Python form)."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, bytes):
        raise ConfigError(key, "expected a str or os.PathLike path, got bytes")
    return _required_str(key, value)


def _application_id(key: str, value: Any) -> str:
    text = _required_str(key, value)
    bad = sorted({c for c in text if not ((c.isascii() and c.isalnum()) or c in "._-")})
    if bad:
        raise ConfigError(
            key, f"may hold only letters, digits, '.', '_' and '-' (it names topics); found {bad}"
        )
    return text


def _bootstrap_servers(key: str, value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    text = _required_str(key, value)
    for server in text.split(","):
        _host_port(key, server.strip())
    return text


def _host_port(key: str, text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(key, f"expected host:port, got {text!r}")
    return host, int(port)


def _application_server(key: str, value: Any) -> str:
    text = _str(key, value).strip()
    if text:
        _host_port(key, text)
    return text


def _serde(key: str, value: Any) -> Serde[Any]:
    return resolve_serde(value, key)


def _object(key: str, value: Any) -> Any:
    """An instance, a callable, or a dotted path to one (extractors, handlers)."""
    if isinstance(value, str):
        module_name, _, attr = value.rpartition(".")
        if not module_name:
            raise ConfigError(key, f"expected a dotted path such as 'pkg.module.Name', got {value!r}")
        try:
            obj = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError, ValueError, TypeError) as exc:
            raise ConfigError(key, f"cannot import {value!r}: {exc}") from exc
        return _instantiate(key, obj)
    return _instantiate(key, value)


def _instantiate(key: str, value: Any) -> Any:
    """A class is instantiated with no arguments; a failure names the key instead of escaping raw."""
    if not isinstance(value, type):
        return value
    try:
        return value()
    except Exception as exc:
        raise ConfigError(key, f"cannot instantiate {value.__qualname__}() without arguments: {exc}") from exc


def _deserialization_handler(key: str, value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower().replace("-", "_") in _DESERIALIZATION_HANDLERS:
        return value.strip().lower().replace("-", "_")
    if isinstance(value, str) and "." not in value:
        raise ConfigError(
            key, f"expected one of {', '.join(_DESERIALIZATION_HANDLERS)} or a handler, got {value!r}"
        )
    return _object(key, value)


def _production_handler(key: str, value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() in _PRODUCTION_HANDLERS:
        return value.strip().lower()
    if isinstance(value, str) and "." not in value:
        raise ConfigError(key, f"expected one of {', '.join(_PRODUCTION_HANDLERS)} or a handler, got {value!r}")
    return _object(key, value)


def _optional_str(key: str, value: Any) -> str | None:
    if value is None:
        return None
    return _required_str(key, value)


_KEYS: dict[str, _Key] = {
    k.name: k
    for k in (
        _Key("application.id", None, _application_id, "Names the consumer group, internal topics and state directory."),
        _Key("bootstrap.servers", None, _bootstrap_servers, "host:port[,host:port...] of the Kafka brokers."),
        _Key("application.server", "", _application_server, "host:port where this instance serves interactive queries."),
        _Key("state.dir", os.path.join(tempfile.gettempdir(), "kafka-streams"), _path, "Root directory of local state."),
        _Key("num.stream.threads", 1, _int(1), "Stream threads per instance."),
        _Key("stream.threads.mode", "auto", _choice("auto", "inline", "process"), "Where stream threads run: 'process' gives each a worker process (uses N cores), 'inline' runs them on the instance's event loop, 'auto' is 'process' for two threads or more (docs/runtime.md)."),
        _Key("group.protocol", "classic", _choice("classic", "streams"), "Rebalance protocol: 'classic' (the assignor runs in the group leader) or 'streams' (KIP-1071: the broker assigns the tasks; docs/streams-groups.md)."),
        _Key("num.standby.replicas", 0, _int(0), "Standby replicas per stateful task."),
        _Key("acceptable.recovery.lag", 10_000, _int(0), "Changelog records a client may lag behind and still be caught up for a task (KIP-441)."),
        _Key("max.warmup.replicas", 2, _int(1), "Warm-up replicas (extra standbys for tasks being moved) in the whole assignment at a time."),
        _Key("probing.rebalance.interval.ms", 600_000, _int(1), "Time until the probing rebalance that lets caught-up warm-ups take over."),
        _Key("commit.interval.ms", 30_000, _int(0), "How often to commit (100 ms under exactly-once unless set)."),
        _Key("processing.guarantee", AT_LEAST_ONCE, _choice(AT_LEAST_ONCE, EXACTLY_ONCE, EXACTLY_ONCE_V2), "Delivery guarantee."),
        _Key("statestore.cache.max.bytes", 10 * 1024 * 1024, _int(0), "Record cache size of the instance, divided among its stream threads (and the global thread)."),
        _Key("buffered.records.per.partition", 1000, _int(1), "Records buffered per partition before it is paused."),
        _Key("max.task.idle.ms", 0, _int(-1), "How long a task waits for data on an empty partition (-1: never waits)."),
        _Key("default.key.serde", Serdes.Bytes(), _serde, "Key serde where none is given."),
        _Key("default.value.serde", Serdes.Bytes(), _serde, "Value serde where none is given."),
        _Key("default.timestamp.extractor", None, _object, "Timestamp extractor (default: the record's timestamp, failing on negative)."),
        _Key("default.deserialization.exception.handler", "log_and_fail", _deserialization_handler, "log_and_fail, log_and_continue or dead_letter."),
        _Key("default.production.exception.handler", "fail", _production_handler, "fail or continue."),
        _Key("errors.dead.letter.queue.topic.name", None, _optional_str, "Dead-letter topic for records that fail to deserialize."),
        _Key("autostop.at", None, _optional_choice("eol"), "KIP-95: 'eol' stops at the end of the input log."),
        _Key("replication.factor", -1, _int(-1), "Replication factor of internal topics (-1: broker default)."),
        _Key("windowstore.changelog.additional.retention.ms", 86_400_000, _int(0), "Added to a window store's retention for its changelog topic's retention.ms (Kafka Streams' default: one day)."),
        _Key("poll.ms", 100, _int(0), "Longest wait of one poll for new records."),
        _Key("state.cleanup.delay.ms", 600_000, _int(0), "Delay before state of tasks no longer owned is deleted."),
        _Key("max.partition.time.lag.ms", 60_000, _int(0), "A partition this far ahead of its task's stream time is paused."),
        _Key(OPTIMIZATION, "none", optimization, "DSL topology optimizations: none, all, or a comma list (docs/configuration.md)."),
        _Key("python.gc.gen0.threshold", 10_000, _int(0), "Python's young-generation GC threshold, raised to this when the process's first stream thread starts (0: leave it alone; docs/runtime.md)."),
    )
}

_ALIASES = {"cache.max.bytes.buffering": "statestore.cache.max.bytes"}


class StreamsConfig(Mapping[str, Any]):
    """Validated Kafka Streams configuration; reads as a mapping of property names to values."""

    def __init__(self, props: Mapping[str, Any] | None = None, *, required: tuple[str, ...] = ("application.id",)) -> None:
        given = props.explicit() if isinstance(props, StreamsConfig) else dict(props or {})
        values: dict[str, Any] = {}
        client: dict[str, Any] = {}
        topic: dict[str, str] = {}
        for raw_key, value in given.items():
            if not isinstance(raw_key, str):
                raise ConfigError(str(raw_key), "configuration keys must be strings")
            key = _ALIASES.get(raw_key, raw_key)
            spec = _KEYS.get(key)
            if spec is not None:
                values[key] = spec.parse(key, value)
            elif key in CLIENT_KEYS or key.startswith(CLIENT_PREFIXES):
                client[key] = value
            elif key.startswith(TOPIC_PREFIX) and len(key) > len(TOPIC_PREFIX):
                topic[key[len(TOPIC_PREFIX) :]] = _topic_config_value(key, value)
            else:
                raise ConfigError(raw_key, _unknown_key_message(raw_key))
        for key in required:
            if values.get(key) in (None, ""):
                raise ConfigError(key, "is required")
        explicit = frozenset(values)
        if "commit.interval.ms" not in values and values.get("processing.guarantee", AT_LEAST_ONCE) != AT_LEAST_ONCE:
            values["commit.interval.ms"] = 100
        if values.get("default.deserialization.exception.handler") == "dead_letter" and not values.get(
            "errors.dead.letter.queue.topic.name"
        ):
            raise ConfigError(
                "errors.dead.letter.queue.topic.name",
                "is required when default.deserialization.exception.handler is dead_letter",
            )
        self._values = {name: spec.default for name, spec in _KEYS.items()} | values
        self._explicit = explicit
        self._client = client
        self._topic = topic

    def __getitem__(self, key: str) -> Any:
        try:
            return self._values[_ALIASES.get(key, key)]
        except KeyError:
            if key in self._client:
                return self._client[key]
            topic_key = self._topic_key(key)
            if topic_key is not None and topic_key in self._topic:
                return self._topic[topic_key]
            raise

    def __iter__(self) -> Iterator[str]:
        yield from self._values
        yield from self._client
        yield from (TOPIC_PREFIX + k for k in self._topic)

    def __len__(self) -> int:
        return len(self._values) + len(self._client) + len(self._topic)

    def __repr__(self) -> str:
        return f"StreamsConfig({redacted(self.explicit())!r})"

    def explicit(self) -> dict[str, Any]:
        """The keys the user set, with their parsed values."""
        return {k: self._values[k] for k in self._explicit} | self._client | {TOPIC_PREFIX + k: v for k, v in self._topic.items()}

    def topic_configs(self) -> dict[str, str]:
        """The `topic.`-prefixed settings without their prefix: configs for every internal topic
        (Kafka Streams' `originalsWithPrefix(TOPIC_PREFIX)`, values as Java's `toString` gives them)."""
        return dict(self._topic)

    def is_set(self, key: str) -> bool:
        return _ALIASES.get(key, key) in self._explicit or key in self._client or self._topic_key(key) in self._topic

    @staticmethod
    def _topic_key(key: str) -> str | None:
        return key[len(TOPIC_PREFIX) :] if key.startswith(TOPIC_PREFIX) else None

    def with_overrides(self, overrides: Mapping[str, Any]) -> StreamsConfig:
        """A new config with some keys replaced (validated as usual)."""
        return StreamsConfig(self.explicit() | dict(overrides), required=())

    @property
    def exactly_once(self) -> bool:
        return bool(self._values["processing.guarantee"] != AT_LEAST_ONCE)

    def client_overrides(self, client: str) -> dict[str, Any]:
        """Kafka client properties for one client kind.

        `client` is "consumer", "main.consumer", "restore.consumer", "global.consumer",
        "producer" or "admin". Bare client keys apply first, then the general prefix, then the
        specific one (`main.consumer.` beats `consumer.`).
        """
        general = "consumer." if client.endswith("consumer") else f"{client}."
        specific = f"{client}."
        out = {k: v for k, v in self._client.items() if k in CLIENT_KEYS}
        for prefix in dict.fromkeys((general, specific)):
            out.update((k[len(prefix):], v) for k, v in self._client.items() if k.startswith(prefix))
        return out

    @staticmethod
    def documentation() -> dict[str, tuple[Any, str]]:
        """Every Kafka Streams key with its default and a line of description."""
        return {name: (spec.default, spec.doc) for name, spec in _KEYS.items()}


def _topic_config_value(key: str, value: Any) -> str:
    """A `topic.` setting as the broker reads it (Java's `toString`: booleans lower case)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise ConfigError(key, f"a topic config must be a string, number or boolean, not {type(value).__name__}")


def _unknown_key_message(key: str) -> str:
    close = difflib.get_close_matches(key, [*_KEYS, *CLIENT_KEYS], n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else "."
    return (
        f"unknown configuration key{hint} Known keys: the Kafka Streams properties "
        f"({', '.join(sorted(_KEYS))}), common client keys, or client keys with a prefix "
        f"({', '.join(CLIENT_PREFIXES)}), or internal topic configs with the prefix {TOPIC_PREFIX!r}"
    )
