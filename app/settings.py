"""Settings of the runnable apps: command-line flags, falling back to STREAMS_* environment variables.

Containers set the environment (docker/compose.yaml); people use flags. Every Kafka Streams
property (`StreamsConfig.documentation()`) is `STREAMS_<NAME>`, dots as underscores
(`commit.interval.ms` is STREAMS_COMMIT_INTERVAL_MS); seven of them also have a flag, which wins.
So is every common client key (`CLIENT_KEYS`, e.g. STREAMS_SESSION_TIMEOUT_MS), which Kafka Streams
also takes among its properties.
Besides: STREAMS_BIND_HOST (the address the REST server binds), STREAMS_PORT (with it,
`application.server` defaults to this host's name and that port, as in a container),
STREAMS_QUERY_DEADLINE_MS (`--query-deadline-ms`, the REST layer's query deadline),
STREAMS_LOG_LEVEL and STREAMS_LOG_FORMAT (app/__main__.py).
Security (docs/security.md): `--security-protocol`, `--sasl-mechanism`, `--sasl-username`,
`--ssl-cafile`, `--ssl-certfile`, `--ssl-keyfile` and `--command-config FILE` (client properties,
Kafka's tools' option); a password only from STREAMS_SASL_PLAIN_PASSWORD or that file, never a flag
(a command line is visible to every user of the machine).
The REST layer's own security (docs/deploy.md, "Securing the REST layer"): `--rest-ssl-certfile`,
`--rest-ssl-keyfile`, `--rest-ssl-cafile`, `--rest-ssl-client-auth`, `--rest-credentials FILE`,
`--rest-principal`, `--rest-protect-probes` (each also STREAMS_REST_<NAME>); the key's passphrase
only from STREAMS_REST_SSL_KEY_PASSWORD, the tokens and passwords only in the credentials file.
"""

from __future__ import annotations

import argparse
import os
import socket
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field

from api import ApiSettings, Credentials, Secret, TlsSettings
from streams_core import StreamsConfig
from streams_core.config import CLIENT_KEYS
from streams_core.tools.command_config import add_command_config_argument, read_properties

__all__ = [
    "FLAG_PROPERTIES",
    "SECURITY_FLAGS",
    "RestSecurity",
    "ServiceSettings",
    "add_service_arguments",
    "default_application_server",
    "env_name",
    "properties_from_env",
    "settings_from",
]

SECURITY_FLAGS: tuple[tuple[str, str, str], ...] = (
    ("--security-protocol", "security.protocol", "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"),
    ("--sasl-mechanism", "sasl.mechanism", "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER"),
    ("--sasl-username", "sasl.plain.username", "SASL user (the password: STREAMS_SASL_PLAIN_PASSWORD)"),
    ("--ssl-cafile", "ssl.cafile", "PEM file of the CA(s) that signed the brokers' certificates"),
    ("--ssl-certfile", "ssl.certfile", "PEM client certificate (mutual TLS)"),
    ("--ssl-keyfile", "ssl.keyfile", "PEM key of the client certificate"),
)
"""Client security keys that also have a flag (which wins over STREAMS_<KEY> and --command-config)."""

FLAG_PROPERTIES = frozenset({
    "application.id", "bootstrap.servers", "application.server", "state.dir",
    "num.standby.replicas", "processing.guarantee", "autostop.at",
})  # fmt: skip
"""The Kafka Streams properties that also have a command-line flag."""


@dataclass(frozen=True, slots=True)
class RestSecurity:
    """The REST layer's TLS and authentication as given (files are read by `api_settings`)."""

    certfile: str | None = None
    keyfile: str | None = None
    cafile: str | None = None
    client_auth: bool = False
    credentials_file: str | None = None
    principal: str | None = None
    protect_probes: bool = False

    def api_settings(self, query_deadline: float, environ: Mapping[str, str] | None = None) -> ApiSettings:
        """ApiSettings with this TLS and these credentials; ValueError (naming no secret) when they do not fit."""
        environ = os.environ if environ is None else environ
        password = environ.get("STREAMS_REST_SSL_KEY_PASSWORD")
        tls = None
        if self.certfile:
            tls = TlsSettings(self.certfile, self.keyfile, Secret(password) if password else None, self.cafile, self.client_auth)
        elif self.keyfile or self.cafile or self.client_auth:
            raise ValueError("--rest-ssl-keyfile, --rest-ssl-cafile and --rest-ssl-client-auth need --rest-ssl-certfile")
        credentials = Credentials.load(self.credentials_file) if self.credentials_file else None
        return ApiSettings(
            query_deadline=query_deadline,
            tls=tls,
            credentials=credentials,
            principal=self.principal,
            open_probes=not self.protect_probes,
        )


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
    query_deadline_ms: int = 5000
    """How long a REST query may take before it answers 503 (`api.ApiSettings.query_deadline`)."""
    properties: Mapping[str, str] = field(default_factory=dict)
    """The other Kafka Streams properties and client keys set as STREAMS_<NAME> (StreamsConfig parses the text)."""
    rest: RestSecurity = field(default_factory=RestSecurity)
    """HTTPS and authentication of the REST layer."""

    @property
    def port(self) -> int:
        return int(self.application_server.rsplit(":", 1)[1])


def env_name(key: str) -> str:
    """The environment variable of a Kafka Streams property: `num.stream.threads` -> STREAMS_NUM_STREAM_THREADS."""
    return "STREAMS_" + key.upper().replace(".", "_").replace("-", "_")


def properties_from_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every Kafka Streams property or common client key set (non-empty) in the environment, by its name."""
    environ = os.environ if environ is None else environ
    keys = [*StreamsConfig.documentation(), *sorted(CLIENT_KEYS)]
    return {key: environ[env_name(key)] for key in keys if environ.get(env_name(key))}


def default_application_server(environ: Mapping[str, str] | None = None) -> str:
    """`<hostname>:$STREAMS_PORT` when STREAMS_PORT is set (the image sets it), else 127.0.0.1:7070."""
    environ = os.environ if environ is None else environ
    port = environ.get("STREAMS_PORT")
    return f"{socket.gethostname()}:{port}" if port else "127.0.0.1:7070"


def _env(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(f"STREAMS_{name}")
    return value if value not in (None, "") else default


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of milliseconds, got {text!r}")
    return value


def add_service_arguments(parser: argparse.ArgumentParser, application_id: str) -> None:
    parser.add_argument("--bootstrap-servers", default=_env("BOOTSTRAP_SERVERS"),
                        help="Kafka brokers host:port[,...]; without it a local broker is started")
    parser.add_argument("--application-server", default=_env("APPLICATION_SERVER", default_application_server()),
                        help="host:port where this instance serves queries (other instances reach it there)")
    parser.add_argument("--state-dir", default=_env("STATE_DIR", os.path.join(tempfile.gettempdir(), "kafka-streams")))
    parser.add_argument("--bind", default=_env("BIND_HOST"),
                        help="address the REST server binds (default: the host of --application-server)")
    parser.add_argument("--application-id", default=_env("APPLICATION_ID", application_id))
    parser.add_argument("--num-standby-replicas", type=int, default=int(_env("NUM_STANDBY_REPLICAS", "0") or 0))
    parser.add_argument("--processing-guarantee", default=_env("PROCESSING_GUARANTEE", "at_least_once"),
                        choices=["at_least_once", "exactly_once"])
    parser.add_argument("--query-deadline-ms", type=_positive, default=_env("QUERY_DEADLINE_MS", "5000"),
                        help="how long a REST query may take before it answers 503 with Retry-After (default 5000)")
    parser.add_argument("--autostop", default=_env("AUTOSTOP_AT"), choices=["eol"],
                        help="batch run (KIP-95 autostop.at; Spark: availableNow): process the input written so far, then exit 0")
    security = parser.add_argument_group("Kafka security (docs/security.md; STREAMS_<KEY> variables work too)")
    for flag, key, help_text in SECURITY_FLAGS:
        security.add_argument(flag, dest=key.replace(".", "_"), metavar=key.rsplit(".", 1)[-1].upper(), help=help_text)
    add_command_config_argument(security)
    rest = parser.add_argument_group("REST security (docs/deploy.md; STREAMS_REST_<NAME> variables work too)")
    rest.add_argument("--rest-ssl-certfile", default=_env("REST_SSL_CERTFILE"),
                      help="PEM certificate (chain) of this instance: serve HTTPS and forward over HTTPS")
    rest.add_argument("--rest-ssl-keyfile", default=_env("REST_SSL_KEYFILE"),
                      help="PEM key of the certificate (its passphrase: STREAMS_REST_SSL_KEY_PASSWORD)")
    rest.add_argument("--rest-ssl-cafile", default=_env("REST_SSL_CAFILE"),
                      help="PEM CA(s) that signed the instances' (and clients') certificates")
    rest.add_argument("--rest-ssl-client-auth", default=_env("REST_SSL_CLIENT_AUTH", "none"), choices=["none", "required"],
                      help="required: mutual TLS, every client presents a certificate signed by --rest-ssl-cafile")
    rest.add_argument("--rest-credentials", default=_env("REST_CREDENTIALS_FILE"), metavar="FILE",
                      help="JSON file of the principals (tokens, passwords) a request must authenticate as")
    rest.add_argument("--rest-principal", default=_env("REST_PRINCIPAL"),
                      help="the principal of --rest-credentials whose token this instance sends to the others")
    rest.add_argument("--rest-protect-probes", action="store_true", default=_env("REST_PROTECT_PROBES", "") == "true",
                      help="/health and /ready also require credentials (default: open to probes)")


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
        query_deadline_ms=args.query_deadline_ms,
        properties={k: v for k, v in properties_from_env().items() if k not in FLAG_PROPERTIES} | _security(args),
        rest=RestSecurity(
            certfile=getattr(args, "rest_ssl_certfile", None),
            keyfile=getattr(args, "rest_ssl_keyfile", None),
            cafile=getattr(args, "rest_ssl_cafile", None),
            client_auth=getattr(args, "rest_ssl_client_auth", "none") == "required",
            credentials_file=getattr(args, "rest_credentials", None),
            principal=getattr(args, "rest_principal", None),
            protect_probes=bool(getattr(args, "rest_protect_probes", False)),
        ),
    )


def _security(args: argparse.Namespace) -> dict[str, str]:
    """Client keys of --command-config, then of the security flags (which win)."""
    command_config = getattr(args, "command_config", None)
    props = read_properties(command_config) if command_config is not None else {}
    for _flag, key, _help in SECURITY_FLAGS:
        value = getattr(args, key.replace(".", "_"), None)
        if value:
            props[key] = value
    return props
