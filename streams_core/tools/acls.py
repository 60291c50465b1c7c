"""The ACLs an application needs, least privilege (docs/security.md), printed or created.

    python -m streams_core.tools acls --application-id ID --principal User:alice
        --input TOPIC [...] --output TOPIC [...] [--exactly-once] [--internal-topics-exist]
        [--create --bootstrap-servers B --command-config FILE]

Without `--create` it prints the ACLs, one a line, in `kafka-acls`' words. With it, it creates
them as the principal of `--command-config` (a super user or one allowed ALTER on the cluster).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Iterable, Sequence

from streams_core.clients import KafkaError
from streams_core.clients.acl_admin import AclAdmin, AclBinding
from streams_core.config import StreamsConfig
from streams_core.errors import StreamsError
from streams_core.tools.command_config import add_command_config_argument, client_properties

__all__ = ["application_acls", "main"]


def application_acls(
    application_id: str,
    principal: str,
    *,
    input_topics: Iterable[str],
    output_topics: Iterable[str],
    exactly_once: bool = False,
    create_internal_topics: bool = True,
) -> list[AclBinding]:
    """The least ACLs with which `principal` runs the application (READ, WRITE and DELETE imply DESCRIBE).

    - READ on each input topic (and on global-table topics), WRITE on each output topic;
    - on topics prefixed `<application.id>-` (changelog and repartition topics, the KIP-95
      stop-offsets topic): READ and WRITE, and CREATE unless they are created beforehand;
    - READ on the group `<application.id>` (join, fetch and commit offsets);
    - under exactly-once: WRITE on transactional ids prefixed `<application.id>-` (one per task).
    """
    internal = f"{application_id}-"
    acls = [AclBinding(principal, "TOPIC", t, "READ") for t in dict.fromkeys(input_topics)]
    acls += [AclBinding(principal, "TOPIC", t, "WRITE") for t in dict.fromkeys(output_topics)]
    operations = ["READ", "WRITE", *(["CREATE"] if create_internal_topics else [])]
    acls += [AclBinding(principal, "TOPIC", internal, op, "PREFIXED") for op in operations]
    acls.append(AclBinding(principal, "GROUP", application_id, "READ"))
    if exactly_once:
        acls.append(AclBinding(principal, "TRANSACTIONAL_ID", internal, "WRITE", "PREFIXED"))
    return acls


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m streams_core.tools acls", description="The least-privilege ACLs of an application."
    )
    parser.add_argument("--application-id", required=True)
    parser.add_argument("--principal", required=True, help="e.g. User:alice")
    parser.add_argument("--input", action="append", default=[], metavar="TOPIC", help="an input topic (repeatable)")
    parser.add_argument("--output", action="append", default=[], metavar="TOPIC", help="an output topic (repeatable)")
    parser.add_argument("--exactly-once", action="store_true", help="processing.guarantee exactly_once(_v2)")
    parser.add_argument("--internal-topics-exist", action="store_true", help="internal topics are made beforehand")
    parser.add_argument("--create", action="store_true", help="create the ACLs (else print them)")
    parser.add_argument("--bootstrap-servers", help="host:port of the Kafka cluster (with --create)")
    add_command_config_argument(parser)
    return parser


async def _create(bootstrap: str, props: dict[str, str], acls: Sequence[AclBinding]) -> None:
    config = StreamsConfig({**props, "bootstrap.servers": bootstrap}, required=("bootstrap.servers",))
    async with AclAdmin(config) as admin:
        await admin.create(acls)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    acls = application_acls(
        args.application_id,
        args.principal,
        input_topics=args.input,
        output_topics=args.output,
        exactly_once=args.exactly_once,
        create_internal_topics=not args.internal_topics_exist,
    )
    if args.create:
        if not args.bootstrap_servers:
            print("error: --create needs --bootstrap-servers", file=sys.stderr)
            return 2
        try:
            asyncio.run(_create(args.bootstrap_servers, client_properties(args), acls))
        except (StreamsError, OSError, ValueError, KafkaError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    for acl in acls:
        print(("created " if args.create else "") + str(acl))
    return 0
