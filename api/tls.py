"""TLS of the REST layer: the server's certificate, mutual TLS, and the client side of forwarding.

An instance serves HTTPS with its certificate and key (PEM files); with `client_auth` it asks
every client for a certificate signed by `cafile` (mutual TLS, ksqlDB's `ssl.client.auth`).
Forwarded queries go to the other instances over HTTPS, trusting `cafile` and presenting this
instance's own certificate. `reload` reads the certificate and key files again (SIGHUP): new
connections get the new certificate, open ones keep theirs.
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass, field

from api.secrets import Secret

__all__ = ["TlsSettings"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """Where the PEM files are; the key's passphrase as a `Secret` (never a flag, never printed)."""

    certfile: str
    keyfile: str | None = None
    key_password: Secret | None = field(default=None, repr=False)
    cafile: str | None = None
    """The CA(s) that signed the instances' (and, with `client_auth`, the clients') certificates."""
    client_auth: bool = False
    """Mutual TLS: refuse, during the handshake, a client without a certificate signed by `cafile`."""

    def __post_init__(self) -> None:
        if self.client_auth and not self.cafile:
            raise ValueError("client certificate authentication needs the CA file that signs client certificates")

    def _load_own(self, context: ssl.SSLContext) -> None:
        password = self.key_password.reveal() if self.key_password else ""
        try:  # always a callback: without one, OpenSSL would ask for the passphrase on the terminal
            context.load_cert_chain(self.certfile, self.keyfile, lambda: password)
        except ssl.SSLError as exc:  # the message of a bad passphrase names no secret, but say what failed
            raise ValueError(f"cannot load the certificate {self.certfile} with its key: {exc.reason or exc}") from None

    def server_context(self) -> ssl.SSLContext:
        """The server's context: its certificate, and with `client_auth` the clients' CA, required."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._load_own(context)
        if self.cafile:
            context.load_verify_locations(self.cafile)
        context.verify_mode = ssl.CERT_REQUIRED if self.client_auth else ssl.CERT_NONE
        return context

    def client_context(self) -> ssl.SSLContext:
        """The context of forwarded queries: verifies the other instances against `cafile` (the system's
        CAs without it) and their host names, and presents this instance's certificate."""
        context = ssl.create_default_context(cafile=self.cafile)
        self._load_own(context)
        return context

    def reload(self, *contexts: ssl.SSLContext) -> None:
        """Load the certificate and key files again into live contexts (new handshakes use them).

        The new files are read into a scratch context first, so that a half-written pair leaves
        the served one in place (ValueError). The CA file is read at start only.
        """
        self._load_own(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER))
        for context in contexts:
            self._load_own(context)
        log.info("reloaded the REST certificate %s", self.certfile)
