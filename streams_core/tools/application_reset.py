"""The application reset tool, as Kafka's `kafka-streams-application-reset`.

    python -m streams_core.tools reset --application-id ID --bootstrap-servers B
        [--input-topics T ...] [--intermediate-topics T ...]
        [--to-earliest | --to-datetime ISO | --to-offset N]
        [--delete-stopoffsets] [--state-dir D] [--dry-run]

For an application whose group has no active member (it refuses otherwise, naming the members):

1. input topics: the group's committed offsets go to the earliest offset (default), the first
   offset at a time (`--to-datetime`), or an offset (`--to-offset`, clamped to what the log holds);
2. intermediate topics (user topics written and read by the application, `through`): the
   committed offsets go to the end, so nothing written by an earlier run is read again;
3. internal topics are deleted: `<application.id>-...-repartition`, `<application.id>-...-changelog`
   and the KIP-95 metadata topic `<application.id>-autostop-metadata`;
4. with `--state-dir`, the local state `<state-dir>/<application.id>` is wiped.

`--delete-stopoffsets` alone only deletes the KIP-95 metadata topic, so that a batch run stopped
by hand starts fresh (with new stop offsets) instead of continuing the stopped run.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from streams_core.clients import KafkaError
from streams_core.clients.group_admin import GroupAdmin
from streams_core.common.topic_partition import TopicPartition
from streams_core.config import StreamsConfig
from streams_core.errors import StreamsError
from streams_core.runtime.autostop.autostop_metadata import metadata_topic_name
from streams_core.tools.command_config import add_command_config_argument, client_properties

__all__ = ["ResetPlan", "main", "reset_application"]


@dataclass(slots=True)
class ResetPlan:
    """What a reset does (and, with --dry-run, only says)."""

    offsets: dict[TopicPartition, int] = field(default_factory=dict)
    topics_to_delete: list[str] = field(default_factory=list)
    state_dir: Path | None = None

    def describe(self) -> list[str]:
        lines = [f"reset offset of {tp} to {o}" for tp, o in sorted(self.offsets.items())]
        lines += [f"delete topic {t}" for t in self.topics_to_delete]
        if self.state_dir is not None:
            lines.append(f"delete local state {self.state_dir}")
        return lines or ["nothing to do"]


def _is_internal(application_id: str, topic: str) -> bool:
    prefix = f"{application_id}-"
    return topic.startswith(prefix) and (
        topic.endswith("-repartition") or topic.endswith("-changelog") or topic == metadata_topic_name(application_id)
    )


async def reset_application(args: argparse.Namespace) -> ResetPlan:
    """Plan the reset and, unless `args.dry_run`, carry it out; StreamsError when the group is active."""
    config = StreamsConfig(
        {**client_properties(args), "application.id": args.application_id, "bootstrap.servers": args.bootstrap_servers}
    )
    app = args.application_id
    only_stop_offsets = args.delete_stopoffsets and not (args.input_topics or args.intermediate_topics or args.state_dir)
    plan = ResetPlan()
    async with GroupAdmin(config) as admin:
        members = await admin.active_members()
        if members:
            raise StreamsError(f"application {app!r} still has active members; stop them before resetting: {', '.join(members)}")
        topics = await admin.list_topics()
        if only_stop_offsets:
            plan.topics_to_delete = [t for t in topics if t == metadata_topic_name(app)]
        else:
            inputs = await admin.partitions(args.input_topics)
            missing = sorted(set(args.input_topics) - {tp.topic for tp in inputs})
            if missing:
                raise StreamsError(f"input topics not found: {missing}")
            if args.to_datetime is not None:
                plan.offsets.update(await admin.offsets_for_time(inputs, args.to_datetime))
            elif args.to_offset is not None:
                earliest, latest = await admin.earliest(inputs), await admin.latest(inputs)
                plan.offsets.update({tp: min(max(args.to_offset, earliest[tp]), latest[tp]) for tp in inputs})
            else:
                plan.offsets.update(await admin.earliest(inputs))
            plan.offsets.update(await admin.latest(await admin.partitions(args.intermediate_topics)))
            plan.topics_to_delete = [t for t in topics if _is_internal(app, t)]
            if args.state_dir:
                plan.state_dir = Path(args.state_dir) / app
        if not args.dry_run:
            await admin.commit(plan.offsets)
            await admin.delete_topics(plan.topics_to_delete)
            if plan.state_dir is not None and plan.state_dir.exists():
                shutil.rmtree(plan.state_dir)
    return plan


def _datetime_ms(text: str) -> int:
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 date-time: {text!r} (e.g. 2026-11-23T10:00:00+00:00)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m streams_core.tools reset",
        description="Reset a streams-core application so that it reprocesses its input (as kafka-streams-application-reset).",
    )
    parser.add_argument("--application-id", required=True, help="the application.id (consumer group) to reset")
    parser.add_argument("--bootstrap-servers", required=True, help="host:port of the Kafka cluster")
    add_command_config_argument(parser)
    parser.add_argument(
        "--input-topics", nargs="*", default=[], metavar="T", help="input topics: offsets to the start (or --to-*)"
    )
    parser.add_argument(
        "--intermediate-topics",
        nargs="*",
        default=[],
        metavar="T",
        help="user topics written and read by the app: offsets to the end",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--to-earliest", action="store_true", help="input offsets to the earliest offset (the default)")
    where.add_argument(
        "--to-datetime", type=_datetime_ms, metavar="ISO", help="input offsets to the first record at or after ISO"
    )
    where.add_argument("--to-offset", type=int, metavar="N", help="input offsets to N (clamped to each partition's log)")
    parser.add_argument("--delete-stopoffsets", action="store_true", help="delete the KIP-95 stop offsets (alone: only that)")
    parser.add_argument("--state-dir", help="also wipe <state-dir>/<application-id>, the local state")
    parser.add_argument("--dry-run", action="store_true", help="print what would be done, change nothing")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        plan = asyncio.run(reset_application(args))
    except (StreamsError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KafkaError as exc:
        print(f"error: Kafka refused the request: {exc}", file=sys.stderr)  # its str names the error
        return 1
    prefix = "would " if args.dry_run else ""
    for line in plan.describe():
        print(prefix + line)
    return 0
