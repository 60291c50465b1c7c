"""Security settings in both vocabularies: Java's `sasl.jaas.config` read into aiokafka's arguments,
a token provider named by its dotted path, and our settings written back as Java client
properties (for the Spark runner, whose Kafka source and sink are the Java client).

Values of secret keys (passwords, JAAS configs, keys) never appear in an error message.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from aiokafka.abc import AbstractTokenProvider

from streams_core.errors import ConfigError

__all__ = ["java_security_properties", "parse_jaas_config", "token_provider"]

_LOGIN_MODULES: Final = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": "PLAIN",
    "org.apache.kafka.common.security.scram.ScramLoginModule": "SCRAM",
}
_JAAS: Final = re.compile(r"^\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\s+(.*?);?\s*$", re.S)
_OPTION: Final = re.compile(r'\s*([\w.]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+))')


def parse_jaas_config(key: str, value: Any) -> dict[str, str]:
    """`sasl.jaas.config` of the PLAIN or SCRAM login module as aiokafka's user name and password.

    aiokafka has no JAAS: only these two modules' `username` and `password` options are read.
    """
    match = _JAAS.match(str(value)) if isinstance(value, str) else None
    if match is None:
        raise ConfigError(key, 'expected \'<LoginModule class> required username="..." password="...";\'')
    module, _flag, rest = match.groups()
    if module not in _LOGIN_MODULES:
        raise ConfigError(
            key,
            f"login module {module} is not supported (aiokafka takes PLAIN and SCRAM credentials; "
            "for OAUTHBEARER set sasl.oauth.token.provider)",
        )
    options = {m.group(1): m.group(2) if m.group(2) is not None else m.group(3) for m in _OPTION.finditer(rest)}
    if not options.get("username") or not options.get("password"):
        raise ConfigError(key, f"{module} needs username and password options")
    return {"sasl_plain_username": options["username"], "sasl_plain_password": options["password"]}


def token_provider(key: str, value: Any) -> AbstractTokenProvider:
    """An aiokafka token provider, or the dotted name (`pkg.module.Name` or `pkg.module:Name`) of
    a class or factory that makes one with no arguments (so that it can come from the environment)."""
    if isinstance(value, str):
        module_name, sep, attr = value.strip().partition(":")
        if not sep:
            module_name, _, attr = value.strip().rpartition(".")
        try:
            factory = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError, ValueError) as exc:
            raise ConfigError(key, f"cannot import {value!r}: {exc}") from exc
        try:
            value = factory()
        except Exception as exc:
            raise ConfigError(key, f"{value!r} could not make a token provider: {exc!r}") from exc
    if not isinstance(value, AbstractTokenProvider):
        raise ConfigError(key, f"expected an aiokafka AbstractTokenProvider, got {type(value).__name__}")
    return value


def _jaas_value(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def java_security_properties(settings: Mapping[str, Any], origin: str) -> dict[str, str]:
    """Java client properties for the security settings of one client (`settings`: bare keys).

    PEM files become PEM trust and key stores (KIP-651): `ssl.cafile` is the truststore, the
    certificate chain and key are inlined (`ssl.keystore.certificate.chain`, `ssl.keystore.key`;
    the key in PKCS#8 form, as Java reads it). User name and password become `sasl.jaas.config`.
    `origin` names the settings in errors (e.g. "the Spark runner's consumer").
    """
    out: dict[str, str] = {}
    protocol = str(settings.get("security.protocol", "PLAINTEXT")).upper()
    if protocol == "PLAINTEXT":
        return out
    out["security.protocol"] = protocol
    for key in ("ssl.context", "ssl.capath", "sasl.oauth.token.provider"):
        if key in settings:
            raise ConfigError(key, f"has no Java client equivalent for {origin}: use PEM files (ssl.cafile, ...)")
    if "ssl.cafile" in settings:
        out |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(settings["ssl.cafile"])}
    if "ssl.certfile" in settings:
        try:
            chain = Path(settings["ssl.certfile"]).read_text()
            key = Path(settings.get("ssl.keyfile", settings["ssl.certfile"])).read_text()
        except OSError as exc:
            raise ConfigError("ssl.certfile", f"cannot read the client certificate: {exc}") from exc
        out |= {"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": chain, "ssl.keystore.key": key}
        if "ssl.password" in settings:
            out["ssl.key.password"] = str(settings["ssl.password"])
    if protocol.startswith("SASL_"):
        mechanism = str(settings.get("sasl.mechanism", "PLAIN")).upper()
        out["sasl.mechanism"] = mechanism
        if "sasl.jaas.config" in settings:
            out["sasl.jaas.config"] = str(settings["sasl.jaas.config"])
        elif mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
            user, password = settings.get("sasl.plain.username"), settings.get("sasl.plain.password")
            if not user or not password:
                raise ConfigError("sasl.plain.username", f"{mechanism} needs sasl.plain.username and sasl.plain.password")
            out["sasl.jaas.config"] = (
                f"org.apache.kafka.common.security.{module} required "
                f"username={_jaas_value(str(user))} password={_jaas_value(str(password))};"
            )
        else:
            raise ConfigError("sasl.mechanism", f"{mechanism} has no Java client equivalent here for {origin}")
    return out
