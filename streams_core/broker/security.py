"""Security for the local broker: SASL/SSL listeners, test certificates, JAAS, users and ACLs.

`BrokerSecurity` says what the broker should require (listeners by security protocol, SCRAM and
PLAIN users, client-certificate users, the `StandardAuthorizer`); `SecurityMaterial` makes the
files it needs in the data dir (a test CA, the broker's PEM keystore, one certificate per
client-certificate user; `trustme` writes them, so `pip install trustme` first) and turns them
into broker properties, `StorageTool format --add-scram` arguments and client properties.

Listener names are their security protocol (`SASL_SSL://127.0.0.1:P`). The controller listener
is SSL with a required client certificate: the broker talks to its own controller as
`User:broker`, a super user, so no listener grants `User:ANONYMOUS` anything. PLAIN is always
enabled on SASL listeners for the super user, whose password is written (mode 0600) to
`security/super-user.password`: the readiness probe and the set-up of ACLs use it.
"""

from __future__ import annotations

import os
import secrets
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

__all__ = ["PROTOCOLS", "SASL_MECHANISMS", "BrokerSecurity", "SecurityMaterial"]

PROTOCOLS: Final = ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL")
SASL_MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_SCRAM: Final = ("SCRAM-SHA-256", "SCRAM-SHA-512")
_SCRAM_ITERATIONS: Final = 4096
#: The broker certificate's CN, mapped to the principal `User:broker` by the rule below.
BROKER_PRINCIPAL_NAME: Final = "broker"
#: Certificates become `User:<CN>` (Kafka's default would be the whole distinguished name).
PRINCIPAL_MAPPING_RULES: Final = "RULE:^CN=([^,]+).*$/$1/,DEFAULT"
_LOGIN: Final = "org.apache.kafka.common.security"


@dataclass(frozen=True)
class BrokerSecurity:
    """What the local broker requires of its clients.

    `listeners`: one listener per security protocol, the first one is `bootstrap_servers`.
    `scram_users` / `plain_users`: name -> password (SCRAM users get both SHA-256 and SHA-512
    credentials, stored at format time). `certificate_users`: names that get a client
    certificate with that CN (principal `User:<name>`); `ssl_client_auth` makes SSL listeners
    require one. `authorizer`: KRaft's `StandardAuthorizer` with `allow.everyone.if.no.acl.found
    =false`; `super_user` (and `User:broker`) may do anything. `oauthbearer`: OAUTHBEARER on SASL
    listeners with Kafka's unsecured JWT validator (tests only: it accepts unsigned tokens).
    """

    listeners: tuple[str, ...] = ("SASL_SSL",)
    scram_users: Mapping[str, str] = field(default_factory=dict)
    plain_users: Mapping[str, str] = field(default_factory=dict)
    certificate_users: tuple[str, ...] = ()
    ssl_client_auth: bool = False
    authorizer: bool = False
    super_user: str = "admin"
    oauthbearer: bool = False

    def __post_init__(self) -> None:
        if not self.listeners:
            raise ValueError("at least one listener is needed")
        for protocol in self.listeners:
            if protocol not in PROTOCOLS:
                raise ValueError(f"unknown security protocol {protocol!r}; expected one of {', '.join(PROTOCOLS)}")
        if len(set(self.listeners)) != len(self.listeners):
            raise ValueError(f"one listener per security protocol: {self.listeners}")
        if self.authorizer and "PLAINTEXT" in self.listeners:
            raise ValueError("a PLAINTEXT listener with the authorizer: every client would be User:ANONYMOUS")
        for name in (*self.scram_users, *self.plain_users, *self.certificate_users, self.super_user):
            if not name or any(c in name for c in '",=;: '):
                raise ValueError(f"illegal user name {name!r}")

    @property
    def needs_sasl(self) -> bool:
        return any(p.startswith("SASL_") for p in self.listeners)


def _quote(value: str) -> str:
    """A JAAS option value (double-quoted; our names and generated passwords have no quotes)."""
    if '"' in value or "\\" in value:
        raise ValueError("JAAS values cannot hold quotes or backslashes")
    return f'"{value}"'


class SecurityMaterial:
    """The files and properties of one broker's `BrokerSecurity`, under `<data dir>/security`."""

    def __init__(self, security: BrokerSecurity, data_dir: Path) -> None:
        self.security = security
        self.dir = data_dir / "security"

    # -- files -------------------------------------------------------------------------------
    @property
    def ca_file(self) -> Path:
        """The test CA's certificate (PEM): clients' `ssl.cafile`, Java's PEM truststore."""
        return self.dir / "ca.pem"

    @property
    def broker_keystore(self) -> Path:
        """The broker's PEM keystore: its PKCS#8 key and certificate (`ssl.keystore.type=PEM`)."""
        return self.dir / "broker-keystore.pem"

    def cert_file(self, user: str) -> Path:
        return self.dir / f"{user}.crt"

    def key_file(self, user: str) -> Path:
        return self.dir / f"{user}.key"

    @property
    def super_password_file(self) -> Path:
        return self.dir / "super-user.password"

    def prepare(self) -> None:
        """Write the CA, the broker's and the users' certificates and the super user's password,
        once: a reused data dir keeps its files (and so the SCRAM credentials formatted with them)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)
        if not self.super_password_file.exists():
            _write_secret(self.super_password_file, secrets.token_urlsafe(18))
        wanted = [BROKER_PRINCIPAL_NAME, *self.security.certificate_users]
        if self.ca_file.exists() and all(self.cert_file(u).exists() for u in wanted):
            return
        try:
            import trustme
        except ImportError as exc:  # a dev extra: the product never makes certificates
            raise RuntimeError("the local broker's test certificates need trustme: pip install trustme") from exc
        ca = trustme.CA(organization_name="streams-core local broker", key_type=trustme.KeyType.RSA)
        self.ca_file.write_bytes(ca.cert_pem.bytes())
        for user in wanted:
            identities = ("127.0.0.1", "localhost") if user == BROKER_PRINCIPAL_NAME else (f"{user}.client.local",)
            leaf = ca.issue_cert(*identities, common_name=user, key_type=trustme.KeyType.RSA)
            key = _pkcs8(leaf.private_key_pem.bytes())
            chain = b"".join(blob.bytes() for blob in leaf.cert_chain_pems)
            _write_secret(self.key_file(user), key.decode())
            self.cert_file(user).write_bytes(chain)
            if user == BROKER_PRINCIPAL_NAME:
                _write_secret(self.broker_keystore, key.decode() + chain.decode())

    @property
    def super_password(self) -> str:
        return self.super_password_file.read_text().strip()

    # -- broker configuration ----------------------------------------------------------------
    def server_properties(self, ports: Mapping[str, int], host: str) -> dict[str, str]:
        """Listeners, the SSL stores, JAAS per listener and mechanism, and the authorizer."""
        sec = self.security
        protocols = {name: name for name in sec.listeners} | {"CONTROLLER": "SSL"}
        props = {
            "listeners": ",".join(f"{name}://{host}:{ports[name]}" for name in (*sec.listeners, "CONTROLLER")),
            "advertised.listeners": ",".join(f"{name}://{host}:{ports[name]}" for name in sec.listeners),
            "listener.security.protocol.map": ",".join(f"{k}:{v}" for k, v in protocols.items()),
            "inter.broker.listener.name": sec.listeners[0],
            "ssl.principal.mapping.rules": PRINCIPAL_MAPPING_RULES,
        }
        for name, protocol in protocols.items():
            prefix = f"listener.name.{name.lower()}."
            if protocol in ("SSL", "SASL_SSL"):
                props |= {
                    prefix + "ssl.keystore.type": "PEM",
                    prefix + "ssl.keystore.location": str(self.broker_keystore),
                    prefix + "ssl.truststore.type": "PEM",
                    prefix + "ssl.truststore.location": str(self.ca_file),
                }
            if name == "CONTROLLER" or (protocol == "SSL" and sec.ssl_client_auth):
                props[prefix + "ssl.client.auth"] = "required"
            if protocol.startswith("SASL_"):
                props |= self._jaas(prefix)
        if sec.needs_sasl and sec.listeners[0].startswith("SASL_"):
            props["sasl.mechanism.inter.broker.protocol"] = "PLAIN"
        if sec.authorizer:
            props |= {
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "allow.everyone.if.no.acl.found": "false",
                "super.users": f"User:{sec.super_user};User:{BROKER_PRINCIPAL_NAME}",
            }
        return props

    def _jaas(self, prefix: str) -> dict[str, str]:
        sec = self.security
        password = self.super_password
        plain_users = {sec.super_user: password, **sec.plain_users}
        entries = " ".join(f"user_{name}={_quote(pw)}" for name, pw in plain_users.items())
        mechanisms = ["PLAIN", *(_SCRAM if sec.scram_users else ()), *(["OAUTHBEARER"] if sec.oauthbearer else [])]
        props = {
            prefix + "sasl.enabled.mechanisms": ",".join(mechanisms),
            prefix + "plain.sasl.jaas.config": f"{_LOGIN}.plain.PlainLoginModule required "
            f"username={_quote(sec.super_user)} password={_quote(password)} {entries};",
        }
        if sec.scram_users:
            for mechanism in _SCRAM:
                props[f"{prefix}{mechanism.lower()}.sasl.jaas.config"] = (
                    f"{_LOGIN}.scram.ScramLoginModule required username={_quote(sec.super_user)} password={_quote(password)};"
                )
        if sec.oauthbearer:
            props[prefix + "oauthbearer.sasl.jaas.config"] = (
                f"{_LOGIN}.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub={_quote(sec.super_user)};"
            )
        return props

    def format_arguments(self) -> list[str]:
        """`StorageTool format --add-scram` arguments: SCRAM credentials go into the metadata log."""
        sec = self.security
        if not sec.scram_users:
            return []
        users = {sec.super_user: self.super_password, **sec.scram_users}
        return [
            arg
            for mechanism in _SCRAM
            for name, password in users.items()
            for arg in ("--add-scram", f"{mechanism}=[name={name},iterations={_SCRAM_ITERATIONS},password={password}]")
        ]

    # -- clients -----------------------------------------------------------------------------
    def client_properties(self, protocol: str, *, user: str | None = None, mechanism: str | None = None) -> dict[str, Any]:
        """StreamsConfig client properties to connect to the `protocol` listener as `user`.

        SASL listeners: `mechanism` (default SCRAM-SHA-512 for SCRAM users, else PLAIN) with the
        user's password (the super user's when `user` is None). SSL: the user's client
        certificate when it has one (the broker's, i.e. a super user, when `user` is None).
        """
        sec = self.security
        if protocol not in sec.listeners:
            raise ValueError(f"the broker has no {protocol} listener (it has {', '.join(sec.listeners)})")
        props: dict[str, Any] = {"security.protocol": protocol}
        if protocol in ("SSL", "SASL_SSL"):
            props["ssl.cafile"] = str(self.ca_file)
        if protocol == "SSL":
            name = user or BROKER_PRINCIPAL_NAME
            if name == BROKER_PRINCIPAL_NAME or name in sec.certificate_users:
                props |= {"ssl.certfile": str(self.cert_file(name)), "ssl.keyfile": str(self.key_file(name))}
        if protocol.startswith("SASL_"):
            name = user or sec.super_user
            if mechanism is None:
                mechanism = "SCRAM-SHA-512" if name in sec.scram_users else "PLAIN"
            props["sasl.mechanism"] = mechanism
            if mechanism != "OAUTHBEARER":
                password = self.super_password if name == sec.super_user else self._password(name, mechanism)
                props |= {"sasl.plain.username": name, "sasl.plain.password": password}
        return props

    def _password(self, user: str, mechanism: str) -> str:
        users = self.security.scram_users if mechanism in _SCRAM else self.security.plain_users
        if user not in users:
            raise ValueError(f"{user!r} is not a {mechanism} user of this broker")
        return users[user]

    def ssl_context(self) -> ssl.SSLContext:
        """A client SSLContext trusting the test CA, presenting the broker's (super user) certificate."""
        context = ssl.create_default_context(cafile=str(self.ca_file))
        context.load_cert_chain(str(self.cert_file(BROKER_PRINCIPAL_NAME)), str(self.key_file(BROKER_PRINCIPAL_NAME)))
        return context


def _pkcs8(key_pem: bytes) -> bytes:
    """The key as unencrypted PKCS#8 PEM (`BEGIN PRIVATE KEY`), the form Kafka's PEM keystores read."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(key_pem, password=None)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def _write_secret(path: Path, text: str) -> None:
    """Write a key or password readable by its owner only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)

