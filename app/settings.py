"""Settings of the runnable apps: command-line flags, falling back to STREAMS_* environment variables.

Containers set the environment (docker/compose.yaml); people use flags. Names:
STREAMS_BOOTSTRAP_SERVERS, STREAMS_APPLICATION_SERVER, STREAMS_STATE_DIR, STREAMS_BIND_HOST,
STREAMS_APPLICATION_ID, STREAMS_NUM_STANDBY_REPLICAS, STREAMS_PROCESSING_GUARANTEE, STREAMS_AUTOSTOP_AT.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from dataclasses import dataclass

__all__ = ["ServiceSettings", "add_service_arguments", "settings_from"]


@dataclass(frozen=True, slots=True)
class ServiceSettings:
    """Where Kafka is, where this instance answers queries, and where it keeps state."""

    bootstrap_servers: str | None
    application_server: str
    state_dir: str
    bind_host: str
    application_id: str
    num_standby_replicas: int
    processing_guarantee: str
    autostop_at: str | None = None
    """KIP-95: `eol` makes a batch run that stops at the end of the input as it was at the start."""

    @property
    def port(self) -> int:
        return int(self.application_server.rsplit(":", 1)[1])


def _env(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(f"STREAMS_{name}")
    return value if value not in (None, "") else default


def add_service_arguments(parser: argparse.ArgumentParser, application_id: str) -> None:
    parser.add_argument("--bootstrap-servers", default=_env("BOOTSTRAP_SERVERS"),
                        help="Kafka brokers host:port[,...]; without it a local broker is started")
    parser.add_argument("--application-server", default=_env("APPLICATION_SERVER", "127.0.0.1:7070"),
                        help="host:port where this instance serves queries (other instances reach it there)")
    parser.add_argument("--state-dir", default=_env("STATE_DIR", os.path.join(tempfile.gettempdir(), "kafka-streams")))
    parser.add_argument("--bind", default=_env("BIND_HOST"),
                        help="address the REST server binds (default: the host of --application-server)")
    parser.add_argument("--application-id", default=_env("APPLICATION_ID", application_id))
    parser.add_argument("--num-standby-replicas", type=int, default=int(_env("NUM_STANDBY_REPLICAS", "0") or 0))
    parser.add_argument("--processing-guarantee", default=_env("PROCESSING_GUARANTEE", "at_least_once"),
                        choices=["at_least_once", "exactly_once"])
    parser.add_argument("--autostop", default=_env("AUTOSTOP_AT"), choices=["eol"],
                        help="batch run (KIP-95 autostop.at; Spark: availableNow): process the input written so far, then exit 0")


def settings_from(args: argparse.Namespace) -> ServiceSettings:
    host = args.application_server.rsplit(":", 1)[0]
    return ServiceSettings(
        bootstrap_servers=args.bootstrap_servers,
        application_server=args.application_server,
        state_dir=args.state_dir,
        bind_host=args.bind or host,
        application_id=args.application_id,
        num_standby_replicas=args.num_standby_replicas,
        processing_guarantee=args.processing_guarantee,
        autostop_at=args.autostop,
    )
