"""Kafka client properties from a StreamsConfig, translated into aiokafka constructor arguments.

Users write Kafka's own property names (`max.poll.records`, `session.timeout.ms`, `acks`), bare
or with the Kafka Streams prefixes; aiokafka takes snake_case keyword arguments. This module is
the one place that knows both vocabularies, so that the rest of the library never sees aiokafka's
names and a wrong client key fails with a `ConfigError` naming the key as the user wrote it.

Precedence is Kafka Streams': a specific prefix (`main.consumer.`) beats the general one
(`consumer.`), which beats the bare key. `bootstrap.servers` always comes from the bare key, as
Kafka Streams reads and writes one cluster. The defaults Kafka Streams imposes on its clients
apply unless overridden where Kafka Streams allows it:

- consumers: `auto.offset.reset=earliest`, `enable.auto.commit=false` (not configurable),
  `max.poll.records=1000`; under exactly-once `isolation.level=read_committed` (not
  configurable); restore and global consumers have no group and `auto.offset.reset=none`;
  the main consumer `fetch.max.wait.ms=100` (ours, not Kafka Streams': see
  `MAIN_CONSUMER_FETCH_MAX_WAIT_MS`);
- producers: `linger.ms=100` and `acks=all` (the Java producer's default since Kafka 3.0;
  aiokafka's is 1); under exactly-once idempotence on, `acks=all` and
  `transaction.timeout.ms=10000`, which must not be below `commit.interval.ms`.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from aiokafka.helpers import create_ssl_context

from streams_core.clients.client_security import java_security_properties, parse_jaas_config, token_provider
from streams_core.common.config_parsers import boolean, choice, integer, non_empty_string
from streams_core.config import StreamsConfig
from streams_core.errors import ConfigError

__all__ = [
    "CLIENT_PROPERTIES",
    "ClientKind",
    "admin_kwargs",
    "consumer_kwargs",
    "default_client_id",
    "java_client_properties",
    "producer_kwargs",
    "validate_client_configs",
]

ClientKind = Literal["main.consumer", "restore.consumer", "global.consumer", "producer", "admin"]

_CONSUMER: Final = "consumer"
_PRODUCER: Final = "producer"
_ADMIN: Final = "admin"
_ALL = frozenset({_CONSUMER, _PRODUCER, _ADMIN})

_ROLE_SUFFIX: Final[dict[str, str]] = {
    "main.consumer": "consumer",
    "restore.consumer": "restore-consumer",
    "global.consumer": "global-consumer",
    "producer": "producer",
}

STREAMS_TRANSACTION_TIMEOUT_MS: Final = 10_000
"""Kafka Streams' producer `transaction.timeout.ms` under exactly-once (aiokafka's own is 60 s)."""


@dataclass(frozen=True, slots=True)
class _Property:
    """One Kafka client property: the aiokafka argument it becomes and the clients that take it."""

    kwarg: str
    parse: Callable[[str, Any], Any]
    families: frozenset[str]
    doc: str


def _choice(*choices: str, upper: bool = False) -> Callable[[str, Any], str]:
    return choice(*choices, normalize=str.upper if upper else str.lower)


def _acks(key: str, value: Any) -> int | str:
    """Kafka's `acks`: "all" (or -1), 0 or 1; aiokafka takes "all", 0 and 1."""
    text = str(value).strip().lower()
    if text in ("all", "-1"):
        return "all"
    if text in ("0", "1"):
        return int(text)
    raise ConfigError(key, f"expected one of all, -1, 0, 1, got {value!r}")


def _compression(key: str, value: Any) -> str | None:
    text = "none" if value is None else str(value).strip().lower()
    if text == "none":
        return None
    if text not in ("gzip", "snappy", "lz4", "zstd"):
        raise ConfigError(key, f"expected one of none, gzip, snappy, lz4, zstd, got {value!r}")
    return text


_C, _P, _A = frozenset({_CONSUMER}), frozenset({_PRODUCER}), frozenset({_ADMIN})

CLIENT_PROPERTIES: Final[dict[str, _Property]] = {
    "request.timeout.ms": _Property("request_timeout_ms", integer(1), _ALL, "Request timeout."),
    "retry.backoff.ms": _Property("retry_backoff_ms", integer(0), _ALL, "Backoff between retries."),
    "metadata.max.age.ms": _Property("metadata_max_age_ms", integer(0), _ALL, "Metadata refresh period."),
    "connections.max.idle.ms": _Property(
        "connections_max_idle_ms", integer(0), _ALL, "Idle connections are closed after this."
    ),
    "security.protocol": _Property(
        "security_protocol",
        _choice("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL", upper=True),
        _ALL,
        "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.",
    ),
    "sasl.mechanism": _Property(
        "sasl_mechanism",
        _choice("PLAIN", "GSSAPI", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", upper=True),
        _ALL,
        "SASL mechanism.",
    ),
    "sasl.plain.username": _Property("sasl_plain_username", non_empty_string, _ALL, "PLAIN/SCRAM user name."),
    "sasl.plain.password": _Property("sasl_plain_password", non_empty_string, _ALL, "PLAIN/SCRAM password."),
    "sasl.kerberos.service.name": _Property(
        "sasl_kerberos_service_name", non_empty_string, _ALL, "Kerberos service name (GSSAPI)."
    ),
    "sasl.kerberos.domain.name": _Property(
        "sasl_kerberos_domain_name", non_empty_string, _ALL, "Kerberos domain name (GSSAPI)."
    ),
    "sasl.oauth.token.provider": _Property(
        "sasl_oauth_token_provider",
        token_provider,
        _ALL,
        "An aiokafka AbstractTokenProvider, or the dotted name of a class making one (OAUTHBEARER).",
    ),
    "fetch.max.wait.ms": _Property("fetch_max_wait_ms", integer(0), _C, "Longest wait of a fetch."),
    "fetch.min.bytes": _Property("fetch_min_bytes", integer(1), _C, "Bytes a fetch waits for."),
    "fetch.max.bytes": _Property("fetch_max_bytes", integer(1), _C, "Most bytes of one fetch."),
    "max.partition.fetch.bytes": _Property(
        "max_partition_fetch_bytes", integer(1), _C, "Most bytes fetched per partition."
    ),
    "auto.offset.reset": _Property(
        "auto_offset_reset", _choice("earliest", "latest", "none"), _C, "Where to start without a committed offset."
    ),
    "enable.auto.commit": _Property("enable_auto_commit", boolean, _C, "Must stay false: Kafka Streams commits."),
    "auto.commit.interval.ms": _Property("auto_commit_interval_ms", integer(0), _C, "Unused (no auto commit)."),
    "check.crcs": _Property("check_crcs", boolean, _C, "Verify record CRCs."),
    "max.poll.interval.ms": _Property(
        "max_poll_interval_ms", integer(1), _C, "Longest gap between polls before the member leaves."
    ),
    "rebalance.timeout.ms": _Property(
        "rebalance_timeout_ms", integer(1), _C, "aiokafka only: time to rejoin during a rebalance."
    ),
    "session.timeout.ms": _Property("session_timeout_ms", integer(1), _C, "Group session timeout."),
    "heartbeat.interval.ms": _Property("heartbeat_interval_ms", integer(1), _C, "Group heartbeat period."),
    "max.poll.records": _Property("max_poll_records", integer(1), _C, "Most records per poll."),
    "exclude.internal.topics": _Property("exclude_internal_topics", boolean, _C, "Hide internal topics."),
    "isolation.level": _Property(
        "isolation_level", _choice("read_uncommitted", "read_committed"), _C, "Transactional visibility."
    ),
    "client.rack": _Property("client_rack", non_empty_string, _C, "Rack id for follower fetching."),
    "group.instance.id": _Property(
        "group_instance_id", non_empty_string, _C, "Static membership id (suffixed with the thread index)."
    ),
    "acks": _Property("acks", _acks, _P, "all, 0 or 1 (-1 means all)."),
    "compression.type": _Property("compression_type", _compression, _P, "none, gzip, snappy, lz4 or zstd."),
    "batch.size": _Property("max_batch_size", integer(1), _P, "Most bytes of one batch."),
    "max.batch.size": _Property("max_batch_size", integer(1), _P, "aiokafka's name for batch.size."),
    "max.request.size": _Property("max_request_size", integer(1), _P, "Most bytes of one request."),
    "linger.ms": _Property("linger_ms", integer(0), _P, "How long a batch waits to fill."),
    "enable.idempotence": _Property("enable_idempotence", boolean, _P, "Idempotent producer."),
    "transaction.timeout.ms": _Property("transaction_timeout_ms", integer(1), _P, "Transaction timeout."),
}

_SSL_KEYS: Final[dict[str, str]] = {
    "ssl.cafile": "cafile",
    "ssl.capath": "capath",
    "ssl.certfile": "certfile",
    "ssl.keyfile": "keyfile",
    "ssl.password": "password",
}
_SSL_CONTEXT_KEY: Final = "ssl.context"
_JAAS_KEY: Final = "sasl.jaas.config"

_MANAGED: Final[dict[str, str]] = {
    "bootstrap.servers": "set it without a prefix: Kafka Streams uses one cluster for every client",
    "group.id": "the group id is application.id",
    "transactional.id": "Kafka Streams sets it per task under exactly-once",
    "partition.assignment.strategy": "Kafka Streams uses its own partition assignor",
    "key.serializer": "records are serialized by serdes (default.key.serde, ...)",
    "value.serializer": "records are serialized by serdes (default.value.serde, ...)",
    "key.deserializer": "records are deserialized by serdes (default.key.serde, ...)",
    "value.deserializer": "records are deserialized by serdes (default.value.serde, ...)",
}


def _family(client: str) -> str:
    if client.endswith("consumer"):
        return _CONSUMER
    if client in (_PRODUCER, _ADMIN):
        return client
    raise ValueError(f"unknown client kind {client!r}; expected one of {', '.join(_ROLE_SUFFIX)}, admin")


def _prefixes(client: str) -> tuple[str, ...]:
    """The prefixes that configure `client`, most specific first."""
    general = "consumer." if client.endswith("consumer") else f"{client}."
    return tuple(dict.fromkeys((f"{client}.", general)))


def _origin(config: StreamsConfig, client: str, key: str) -> str:
    """The key as the user wrote it for the value `client_overrides` chose."""
    for prefix in _prefixes(client):
        if config.is_set(prefix + key):
            return prefix + key
    return key


def _supported(family: str) -> str:
    names = sorted(k for k, p in CLIENT_PROPERTIES.items() if family in p.families)
    return ", ".join([*names, *_SSL_KEYS, _SSL_CONTEXT_KEY, _JAAS_KEY, "client.id"])


def _translate(config: StreamsConfig, client: str) -> dict[str, Any]:
    """aiokafka arguments for the client keys the user set (no Kafka Streams defaults yet)."""
    family = _family(client)
    kwargs: dict[str, Any] = {}
    ssl_args: dict[str, Any] = {}
    ssl_origins: list[str] = []
    for key, value in config.client_overrides(client).items():
        origin = _origin(config, client, key)
        bare = origin == key
        if key == "client.id":
            continue
        if key in _MANAGED:
            raise ConfigError(origin, f"cannot be set: {_MANAGED[key]}")
        if key in _SSL_KEYS:
            ssl_args[_SSL_KEYS[key]] = non_empty_string(origin, value)
            ssl_origins.append(origin)
            continue
        if key == _JAAS_KEY:
            kwargs |= parse_jaas_config(origin, value)
            continue
        if key == _SSL_CONTEXT_KEY:
            if not isinstance(value, ssl.SSLContext):
                raise ConfigError(origin, f"expected an ssl.SSLContext, got {type(value).__name__}")
            kwargs["ssl_context"] = value
            continue
        prop = CLIENT_PROPERTIES.get(key)
        if prop is None:
            raise ConfigError(
                origin,
                f"unsupported {family} setting (aiokafka 0.14 has no equivalent); supported: {_supported(family)}",
            )
        if family not in prop.families:
            if bare:
                continue
            raise ConfigError(origin, f"is not a {family} setting; it applies to {', '.join(sorted(prop.families))}")
        kwargs[prop.kwarg] = prop.parse(origin, value)
    if ssl_args:
        if "ssl_context" in kwargs:
            raise ConfigError(_SSL_CONTEXT_KEY, f"give either {_SSL_CONTEXT_KEY} or ssl.* files, not both")
        kwargs["ssl_context"] = _ssl_context(ssl_args, ", ".join(ssl_origins))
    elif kwargs.get("security_protocol") in ("SSL", "SASL_SSL") and "ssl_context" not in kwargs:
        kwargs["ssl_context"] = _ssl_context({}, _origin(config, client, "security.protocol"))
    return kwargs


def _ssl_context(args: Mapping[str, Any], keys: str) -> ssl.SSLContext:
    """One SSLContext from the PEM files (`keys` names them in an error); no files: system CAs."""
    try:
        context: ssl.SSLContext = create_ssl_context(**args)
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise ConfigError(keys, f"cannot build the SSL context: {exc}") from exc
    return context


def _bootstrap_servers(config: StreamsConfig) -> list[str]:
    servers = config["bootstrap.servers"]
    if not servers:
        raise ConfigError("bootstrap.servers", "is required to connect to Kafka (host:port[,host:port...])")
    return [s.strip() for s in servers.split(",") if s.strip()]


def default_client_id(config: StreamsConfig, client: ClientKind, thread_index: int = 1) -> str:
    """The client id Kafka Streams would give `client`.

    A `<prefix>client.id` set for this client is used as is; otherwise the bare `client.id` (or
    `application.id`) is the base of `<base>-StreamThread-<n>-consumer`, `...-restore-consumer`,
    `...-producer`, `<base>-GlobalStreamThread-global-consumer` and `<base>-admin`, so broker
    logs and quotas show which thread a client belongs to.
    """
    for prefix in _prefixes(client):
        if config.is_set(f"{prefix}client.id"):
            return non_empty_string(f"{prefix}client.id", config[f"{prefix}client.id"])
    base = config.get("client.id") or config["application.id"] or "streams"
    if client == _ADMIN:
        return f"{base}-admin"
    if client == "global.consumer":
        return f"{base}-GlobalStreamThread-global-consumer"
    return f"{base}-StreamThread-{thread_index}-{_ROLE_SUFFIX[client]}"


def consumer_kwargs(
    config: StreamsConfig,
    client: Literal["main.consumer", "restore.consumer", "global.consumer"] = "main.consumer",
    *,
    group_id: str | None = None,
    client_id: str | None = None,
    thread_index: int = 1,
) -> dict[str, Any]:
    """aiokafka `AIOKafkaConsumer` arguments (without the assignor) for one Kafka Streams consumer.

    The main consumer joins `group_id` (default `application.id`); restore and global consumers
    have no group, are assigned partitions by hand and never reset offsets on their own.
    """
    if _family(client) != _CONSUMER:
        raise ValueError(f"{client!r} is not a consumer")
    user = _translate(config, client)
    if user.get("enable_auto_commit"):
        raise ConfigError(
            _origin(config, client, "enable.auto.commit"), "must be false: Kafka Streams commits offsets itself"
        )
    if config.exactly_once and user.get("isolation_level", "read_committed") != "read_committed":
        raise ConfigError(
            _origin(config, client, "isolation.level"),
            f"must be read_committed when processing.guarantee is {config['processing.guarantee']}",
        )
    kwargs: dict[str, Any] = {
        "bootstrap_servers": _bootstrap_servers(config),
        "auto_offset_reset": "earliest",
        "max_poll_records": 1000,
    }
    if config.exactly_once:
        kwargs["isolation_level"] = "read_committed"
    if client == "main.consumer":
        kwargs["fetch_max_wait_ms"] = MAIN_CONSUMER_FETCH_MAX_WAIT_MS
    kwargs |= user
    kwargs["enable_auto_commit"] = False
    kwargs["client_id"] = client_id or default_client_id(config, client, thread_index)
    if client == "main.consumer":
        kwargs["group_id"] = group_id or config["application.id"]
        if not kwargs["group_id"]:
            raise ConfigError("application.id", "is required: it is the consumer group id")
        if "group_instance_id" in kwargs:
            kwargs["group_instance_id"] = f"{kwargs['group_instance_id']}-{thread_index}"
    else:
        kwargs["group_id"] = None
        kwargs.pop("group_instance_id", None)
        kwargs["auto_offset_reset"] = "none"
    return kwargs


MAIN_CONSUMER_FETCH_MAX_WAIT_MS = 100
"""The main consumer's `fetch.max.wait.ms` unless set (Java's and aiokafka's 500): aiokafka keeps one
fetch in flight per broker, so a fetch held for partitions at their end kept the others, drained
meanwhile, waiting for it (docs/runtime.md, "Fetching")."""


def producer_kwargs(
    config: StreamsConfig,
    *,
    transactional_id: str | None = None,
    client_id: str | None = None,
    thread_index: int = 1,
) -> dict[str, Any]:
    """aiokafka `AIOKafkaProducer` arguments; a `transactional_id` makes it transactional."""
    user = _translate(config, _PRODUCER)
    kwargs: dict[str, Any] = {"bootstrap_servers": _bootstrap_servers(config), "linger_ms": 100, "acks": "all"}
    if config.exactly_once or transactional_id is not None:
        if user.get("enable_idempotence", True) is not True:
            raise ConfigError(
                _origin(config, _PRODUCER, "enable.idempotence"), "must be true under exactly-once (transactions)"
            )
        if user.get("acks", "all") != "all":
            raise ConfigError(_origin(config, _PRODUCER, "acks"), "must be all under exactly-once (transactions)")
        kwargs |= {"enable_idempotence": True, "acks": "all", "transaction_timeout_ms": STREAMS_TRANSACTION_TIMEOUT_MS}
    kwargs |= user
    if config.exactly_once and kwargs["transaction_timeout_ms"] < config["commit.interval.ms"]:
        origin = _origin(config, _PRODUCER, "transaction.timeout.ms")
        raise ConfigError(
            origin if config.is_set(origin) else "commit.interval.ms",
            f"{kwargs['transaction_timeout_ms']} is below commit.interval.ms {config['commit.interval.ms']}: "
            "every transaction would time out; raise it or lower commit.interval.ms",
        )
    if transactional_id is not None:
        if not transactional_id:
            raise ValueError("transactional_id must not be empty")
        kwargs["transactional_id"] = transactional_id
    kwargs["client_id"] = client_id or default_client_id(config, _PRODUCER, thread_index)
    return kwargs


def admin_kwargs(config: StreamsConfig, *, client_id: str | None = None) -> dict[str, Any]:
    """aiokafka `AIOKafkaAdminClient` arguments."""
    kwargs = {"bootstrap_servers": _bootstrap_servers(config)} | _translate(config, _ADMIN)
    kwargs["client_id"] = client_id or default_client_id(config, _ADMIN)
    return kwargs


def validate_client_configs(config: StreamsConfig) -> None:
    """Translate every client's settings once, so a bad client key fails when KafkaStreams is built."""
    consumer_kwargs(config, "main.consumer")
    consumer_kwargs(config, "restore.consumer")
    consumer_kwargs(config, "global.consumer")
    producer_kwargs(config)
    admin_kwargs(config)


def java_client_properties(config: StreamsConfig, client: Literal["consumer", "producer"]) -> dict[str, str]:
    """`bootstrap.servers` and the security settings of `client` as Java client properties
    (the Spark runner passes them to Spark's Kafka source and sink with the `kafka.` prefix)."""
    settings = config.client_overrides(client)
    return {"bootstrap.servers": ",".join(_bootstrap_servers(config))} | java_security_properties(settings, f"the Java {client}")
