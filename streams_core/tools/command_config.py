"""`--command-config FILE` of the tools, as Kafka's own tools have: client properties for secured clusters.

The file is Java properties (`key=value` lines, `#` comments) with the client keys StreamsConfig
takes (`security.protocol`, `sasl.mechanism`, `sasl.plain.username`, `sasl.plain.password` or
`sasl.jaas.config`, `ssl.cafile`, ...; docs/security.md). `STREAMS_<KEY>` environment variables
of the same keys (e.g. STREAMS_SASL_PLAIN_PASSWORD) fill what the file leaves out, so a password
need not be written to a file nor appear on a command line.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path

from streams_core.config import CLIENT_KEYS

__all__ = ["add_command_config_argument", "client_properties", "read_properties"]


def add_command_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--command-config",
        type=Path,
        metavar="FILE",
        help="client properties (security.protocol, sasl.*, ssl.*) for a secured cluster; docs/security.md",
    )


def read_properties(path: Path) -> dict[str, str]:
    """`key=value` (or `key: value`) lines of a properties file; blank and `#`/`!` lines skipped."""
    props: dict[str, str] = {}
    for line in path.read_text().splitlines():
        text = line.strip()
        if not text or text[0] in "#!":
            continue
        cut = min((i for i in (text.find("="), text.find(":")) if i > 0), default=-1)
        if cut < 0:
            raise ValueError(f"{path}: expected key=value, got a line without '=' (line {line[:20]!r}...)")
        props[text[:cut].strip()] = text[cut + 1 :].strip()
    return props


def client_properties(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The client keys from `--command-config` and from STREAMS_* variables (the file wins)."""
    environ = os.environ if environ is None else environ
    props = {key: environ[name] for key in CLIENT_KEYS if (name := "STREAMS_" + key.upper().replace(".", "_")) in environ}
    if getattr(args, "command_config", None) is not None:
        props |= read_properties(args.command_config)
    return props
