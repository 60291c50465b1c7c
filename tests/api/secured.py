"""What the tests of a secured REST layer share: a CA with instance and client certificates (trustme),
PEM files, and a credentials file whose secrets the tests look for where they must not be."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path

import trustme

from api import Credentials, Secret, TlsSettings

__all__ = [
    "CLIENT_TOKEN",
    "ENTRIES",
    "INSTANCE_TOKEN",
    "KEY_PASSWORD",
    "SECRETS",
    "SECRET_FORMS",
    "STORE_TOKEN",
    "USER_PASSWORD",
    "Pki",
    "basic",
    "credentials",
]

INSTANCE_TOKEN = "instance-token-7f3a9c"
CLIENT_TOKEN = "client-token-b41e02"
STORE_TOKEN = "ids-only-token-5d8e61"
USER_PASSWORD = "dashboard-pass-e3c7a0"
KEY_PASSWORD = "key-passphrase-91b2f4"
ENTRIES = {
    "instances": {"token": INSTANCE_TOKEN},
    "client": {"token": CLIENT_TOKEN},
    "ids-reader": {"token": STORE_TOKEN, "stores": ["ids"]},
    "dashboard": {"password": USER_PASSWORD},
}
SECRETS = (INSTANCE_TOKEN, CLIENT_TOKEN, STORE_TOKEN, USER_PASSWORD, KEY_PASSWORD)
"""Every secret the tests use, and (below) the forms a header carries them in."""


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


SECRET_FORMS = (*SECRETS, base64.b64encode(f"dashboard:{USER_PASSWORD}".encode()).decode())


def credentials(directory: Path) -> tuple[Credentials, Path]:
    """The test principals, and the JSON file that holds them."""
    path = directory / "rest-credentials.json"
    path.write_text(json.dumps(ENTRIES), encoding="utf-8")
    return Credentials.load(path), path


@dataclass
class Pki:
    """A CA, the instances' certificate (127.0.0.1, localhost) with an encrypted key, a client's,
    and a certificate of another CA (which the instances must refuse)."""

    directory: Path

    def __post_init__(self) -> None:
        self.ca = trustme.CA()
        self.cafile = self.directory / "ca.pem"
        self.ca.cert_pem.write_to_path(str(self.cafile))
        self.certfile, self.keyfile = self.issue("instance", self.ca)
        self.client_certfile, self.client_keyfile = self.issue("client", self.ca, encrypt=False)
        self.rogue_certfile, self.rogue_keyfile = self.issue("rogue", trustme.CA(), encrypt=False)

    def issue(self, name: str, ca: trustme.CA, *, encrypt: bool = True) -> tuple[Path, Path]:
        """A certificate of `ca` for 127.0.0.1 (its key encrypted with KEY_PASSWORD unless told otherwise)."""
        from cryptography.hazmat.primitives import serialization

        leaf = ca.issue_cert("127.0.0.1", "localhost", common_name=name)
        certfile, keyfile = self.directory / f"{name}.pem", self.directory / f"{name}.key"
        certfile.write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
        key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), None)
        encryption = (
            serialization.BestAvailableEncryption(KEY_PASSWORD.encode()) if encrypt else serialization.NoEncryption()
        )
        keyfile.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption))
        return certfile, keyfile

    def tls(self, *, client_auth: bool = True) -> TlsSettings:
        return TlsSettings(str(self.certfile), str(self.keyfile), Secret(KEY_PASSWORD), str(self.cafile), client_auth)

    def client_cert(self) -> tuple[str, str]:
        return str(self.client_certfile), str(self.client_keyfile)

    def rogue_cert(self) -> tuple[str, str]:
        return str(self.rogue_certfile), str(self.rogue_keyfile)
