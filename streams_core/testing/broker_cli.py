"""The security options of `python -m streams_core.testing.broker` and what it prints about them."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from streams_core.testing.broker_security import PROTOCOLS, BrokerSecurity

if TYPE_CHECKING:
    from streams_core.testing.broker import LocalKafkaBroker

__all__ = ["add_security_arguments", "describe_listeners", "security_from_arguments"]


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
