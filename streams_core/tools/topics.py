"""The topics tool, after Kafka's `kafka-topics`: create and list the topics an application reads.

    python -m streams_core.tools topics create NAME [NAME ...] --partitions N --bootstrap-servers B
        [--replication-factor R] [--config KEY=VALUE ...] [--if-not-exists]
    python -m streams_core.tools topics list --bootstrap-servers B

The local broker (`python -m streams_core.broker`) does not create topics on first use,
and `KafkaStreams.start()` fails on a missing source topic, as Kafka Streams does: input and
output topics are created beforehand, here or with any Kafka tool. Creating a topic that exists
is an error unless `--if-not-exists` (as `kafka-topics --create`). The replication factor
defaults to the broker's `default.replication.factor`. Creation goes through the admin client's
`InternalTopicManager`, which waits until every partition has a leader, so an application
started right after sees the topic.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from streams_core import clients
from streams_core.config import StreamsConfig
from streams_core.errors import StreamsError
from streams_core.tools.command_config import add_command_config_argument, client_properties

__all__ = ["KafkaUnreachableError", "admin_client", "create_topics", "list_topics", "main"]

CONNECT_TIMEOUT_S = 15.0


class KafkaUnreachableError(StreamsError):
    """The admin client could not connect to the bootstrap servers in time."""


@asynccontextmanager
async def admin_client(
    config: Mapping[str, Any], timeout: float = CONNECT_TIMEOUT_S
) -> AsyncIterator[clients.AIOKafkaAdminClient]:
    """An admin client of `config` (`bootstrap.servers` and any client settings) started for the
    block; KafkaUnreachableError when Kafka does not answer within `timeout` seconds."""
    admin = clients.create_admin(StreamsConfig(dict(config), required=("bootstrap.servers",)))
    try:
        await asyncio.wait_for(admin.start(), timeout)
    except Exception as exc:
        await admin.close()
        raise KafkaUnreachableError(f"cannot reach Kafka at {config['bootstrap.servers']} ({exc!r})") from exc
    try:
        yield admin
    finally:
        await admin.close()


async def create_topics(
    bootstrap_servers: str,
    specs: Sequence[clients.NewTopicSpec],
    *,
    if_not_exists: bool = False,
    client_config: Mapping[str, Any] | None = None,
) -> tuple[list[str], dict[str, int]]:
    """Create the topics; returns (created, existing with their partition counts).

    An existing topic is a StreamsError unless `if_not_exists` (then it is left as it is).
    """
    async with admin_client({**(client_config or {}), "bootstrap.servers": bootstrap_servers}) as admin:
        manager = clients.InternalTopicManager(admin)
        counts = await manager.partition_counts(spec.name for spec in specs)
        existing = {name: count for name, count in counts.items() if count is not None}
        if existing and not if_not_exists:
            described = ", ".join(f"{name!r} ({count} partitions)" for name, count in sorted(existing.items()))
            raise StreamsError(f"topic(s) already exist: {described} (--if-not-exists leaves them as they are)")
        created = await manager.ensure_topics([spec for spec in specs if spec.name not in existing])
    return created, existing


async def list_topics(bootstrap_servers: str, client_config: Mapping[str, Any] | None = None) -> dict[str, int]:
    """Every topic of the cluster (that the principal may describe) with its partition count, by name."""
    async with admin_client({**(client_config or {}), "bootstrap.servers": bootstrap_servers}) as admin:
        counts = await clients.InternalTopicManager(admin).partition_counts(await admin.list_topics())
    return {name: count for name, count in sorted(counts.items()) if count is not None}


def _config_entry(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE (a topic config such as cleanup.policy=compact), got {text!r}")
    return key, value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m streams_core.tools topics", description="Create and list Kafka topics (as kafka-topics)."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    create = commands.add_parser("create", help="create topics")
    create.add_argument("names", nargs="+", metavar="NAME", help="the topic name(s)")
    create.add_argument("--partitions", type=int, required=True, metavar="N", help="partitions of each topic")
    create.add_argument(
        "--replication-factor",
        type=int,
        default=None,
        metavar="R",
        help="replicas of each partition (default: the broker's default.replication.factor)",
    )
    create.add_argument(
        "--config",
        type=_config_entry,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a topic config, e.g. cleanup.policy=compact (repeatable)",
    )
    create.add_argument("--if-not-exists", action="store_true", help="leave existing topics as they are")
    listing = commands.add_parser("list", help="list the topics with their partition counts")
    for command in (create, listing):
        command.add_argument(
            "--bootstrap-servers", "--bootstrap-server", required=True, metavar="B", help="host:port of the Kafka cluster"
        )
        add_command_config_argument(command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        props = client_properties(args)
        if args.command == "list":
            for name, count in asyncio.run(list_topics(args.bootstrap_servers, props)).items():
                print(f"{name}\t{count}")
            return 0
        specs = [clients.NewTopicSpec(name, args.partitions, dict(args.config), args.replication_factor) for name in args.names]
        created, existing = asyncio.run(
            create_topics(args.bootstrap_servers, specs, if_not_exists=args.if_not_exists, client_config=props)
        )
    except (StreamsError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except clients.KafkaError as exc:
        print(f"error: Kafka refused the request: {exc}", file=sys.stderr)  # its str names the error
        return 1
    for name in created:
        print(f"created topic {name} ({args.partitions} partitions)")
    for name, count in sorted(existing.items()):
        print(f"topic {name} exists ({count} partitions): left as it is")
    return 0
