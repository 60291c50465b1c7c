"""`python -m streams_core.broker`: one local broker in the foreground, its options and what it prints.

`python -m streams_core.broker streams-groups ARGS...` runs Kafka's tool instead (kafka_tools.py).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Sequence
from types import FrameType

from streams_core.broker.installation import BrokerError
from streams_core.broker.kafka_tools import TOOLS, tool_main
from streams_core.broker.local_kafka_broker import LocalKafkaBroker
from streams_core.broker.security import PROTOCOLS, BrokerSecurity

__all__ = ["add_security_arguments", "describe_listeners", "main", "security_from_arguments"]

log = logging.getLogger(__name__)


def add_security_arguments(parser: argparse.ArgumentParser) -> None:
    """`--listener`, users, client certificates and the authorizer (docs/broker.md, "Security")."""
    group = parser.add_argument_group("security (docs/broker.md)")
    group.add_argument(
        "--listener",
        action="append",
        choices=PROTOCOLS,
        metavar="PROTOCOL",
        help=f"a client listener ({', '.join(PROTOCOLS)}); repeat for several, the first is READY's "
        "(default: one PLAINTEXT listener)",
    )
    group.add_argument("--scram-user", action="append", default=[], metavar="NAME:PASSWORD", help="a SCRAM-SHA-256/512 user")
    group.add_argument("--plain-user", action="append", default=[], metavar="NAME:PASSWORD", help="a PLAIN user")
    group.add_argument("--cert-user", action="append", default=[], metavar="NAME", help="issue a client certificate with CN=NAME")
    group.add_argument("--ssl-client-auth", action="store_true", help="SSL listeners require a client certificate")
    group.add_argument("--authorizer", action="store_true", help="StandardAuthorizer, deny without an ACL")
    group.add_argument("--super-user", default="admin", help="the super user's name (password in the data dir)")
    group.add_argument("--oauthbearer", action="store_true", help="OAUTHBEARER with unsecured JWTs (tests only)")


def _users(values: list[str], option: str) -> dict[str, str]:
    users: dict[str, str] = {}
    for value in values:
        name, sep, password = value.partition(":")
        if not sep or not name or not password:
            raise ValueError(f"{option} takes NAME:PASSWORD")
        users[name] = password
    return users


def security_from_arguments(args: argparse.Namespace) -> BrokerSecurity | None:
    """The broker's security from the parsed options; None for the plain PLAINTEXT broker."""
    listeners = tuple(args.listener or ("PLAINTEXT",))
    if listeners == ("PLAINTEXT",) and not (
        args.scram_user or args.plain_user or args.cert_user or args.authorizer or args.oauthbearer
    ):
        return None
    return BrokerSecurity(
        listeners=listeners,
        scram_users=_users(args.scram_user, "--scram-user"),
        plain_users=_users(args.plain_user, "--plain-user"),
        certificate_users=tuple(args.cert_user),
        ssl_client_auth=args.ssl_client_auth,
        authorizer=args.authorizer,
        super_user=args.super_user,
        oauthbearer=args.oauthbearer,
    )


def describe_listeners(broker: LocalKafkaBroker) -> str:
    """Lines printed before READY: each listener, and where the CA and the certificates are."""
    if broker.material is None:
        return ""
    lines = [f"LISTENER {name} {broker.listener(name)}" for name in broker.listener_ports]
    material = broker.material
    lines.append(f"CA {material.ca_file}")
    lines += [f"CERT {user} {material.cert_file(user)} {material.key_file(user)}" for user in material.security.certificate_users]
    lines.append(f"SUPER_USER {material.security.super_user} {material.super_password_file}")
    return "".join(line + "\n" for line in lines)


class _Shutdown(Exception):
    """Raised from the SIGTERM/SIGINT handler to leave the start-up wait or the idle loop."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run a broker in the foreground, print ``READY 127.0.0.1:<port>``, stop on SIGTERM/SIGINT.

    A first argument naming a Kafka tool (``streams-groups``) runs that tool with the other arguments.
    """
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in and args_in[0] in TOOLS:
        return tool_main(args_in[0], args_in[1:])
    parser = argparse.ArgumentParser(
        prog="python -m streams_core.broker",
        description="Run a local single-node KRaft Kafka broker bound to 127.0.0.1.",
        epilog="python -m streams_core.broker streams-groups --bootstrap-server HOST:PORT --describe --group APP "
        "[--members|--offsets|--state] runs Kafka's kafka-streams-groups.sh (StreamsGroupCommand; kafka-tools "
        "is fetched from Maven Central on first use; --help for its options).",
    )
    parser.add_argument("--port", type=int, default=9092, help="client port (0: a free one)")
    parser.add_argument("--data-dir", required=True, help="storage, configs and logs")
    parser.add_argument("--controller-port", type=int, default=0, help="KRaft controller port")
    parser.add_argument("--fresh", action="store_true", help="wipe the data dir first")
    parser.add_argument("--auto-create-topics", action="store_true", help="auto.create.topics.enable=true")
    parser.add_argument("--timeout", type=float, default=60.0, help="start-up timeout (s)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    add_security_arguments(parser)
    args = parser.parse_args(args_in)
    try:
        security = security_from_arguments(args)
    except ValueError as exc:
        parser.error(str(exc))
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )

    stopping = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        if stopping:
            return
        stopping = True
        raise _Shutdown(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    broker = LocalKafkaBroker(
        args.data_dir,
        args.port,
        controller_port=args.controller_port,
        auto_create_topics=args.auto_create_topics,
        fresh=args.fresh,
        start_timeout=args.timeout,
        security=security,
    )
    try:
        try:
            broker.start()
            sys.stdout.write(describe_listeners(broker))
            sys.stdout.write(f"READY {broker.bootstrap_servers}\n")
            sys.stdout.flush()
            assert broker.process is not None
            code = broker.process.wait()  # a signal interrupts this with _Shutdown
            stopping = True
            log.error("the Kafka broker exited unexpectedly with code %s", code)
            sys.stderr.write(broker.diagnostics() + "\n")
            return 1
        except _Shutdown as sig:
            log.info("%s received: stopping the broker", sig)
            stopping = True
            broker.stop()
            return 0
    except BrokerError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    finally:
        stopping = True
        broker.stop()

