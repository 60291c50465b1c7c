"""The local broker's configuration files: ``server.properties``, the log4j2 config, JVM flags.

Single node (broker and controller in one JVM), loopback only, settings chosen for a fast start
on a small machine; docs/broker.md says why each one is there.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "DEFAULT_JVM_OPTS",
    "ENV_JVM_OPTS",
    "NODE_ID",
    "java_property",
    "log4j2_properties",
    "properties_text",
    "random_cluster_id",
    "server_properties",
]

NODE_ID = 1
#: JVM flags chosen for a fast start on a small (2-core) machine; see docs/broker.md.
DEFAULT_JVM_OPTS: tuple[str, ...] = (
    "-Xms256m",
    "-Xmx1g",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-Djava.awt.headless=true",
    "-Djava.net.preferIPv4Stack=true",
)
#: Environment variable of extra/replacement JVM flags.
ENV_JVM_OPTS = "STREAMS_KAFKA_JVM_OPTS"


def random_cluster_id() -> str:
    """A Kafka cluster id, the format of ``StorageTool random-uuid``, without starting a JVM."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def java_property(value: object) -> str:
    """A Python value as a Java properties value (booleans in lower case)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def server_properties(
    host: str, port: int, controller_port: int, log_dir: Path, *, auto_create_topics: bool
) -> dict[str, str]:
    """The base ``server.properties`` of a single-node PLAINTEXT broker (security and overrides go on top)."""
    return {
        "process.roles": "broker,controller",
        "node.id": str(NODE_ID),
        "controller.quorum.voters": f"{NODE_ID}@{host}:{controller_port}",
        "listeners": f"PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{host}:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(log_dir),
        "num.partitions": "1",
        "default.replication.factor": "1",
        "min.insync.replicas": "1",
        "auto.create.topics.enable": java_property(auto_create_topics),
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "share.coordinator.state.topic.num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0",
        "group.min.session.timeout.ms": "1000",
        "num.network.threads": "2",
        "num.io.threads": "4",
        "background.threads": "4",
        "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
        "log.cleaner.threads": "1",
    }


def properties_text(props: Mapping[str, str]) -> str:
    """``props`` in Java properties form, headed by who wrote it."""
    return "# written by streams_core.broker\n" + "".join(f"{k}={v}\n" for k, v in props.items())


def log4j2_properties(server_log: Path) -> str:
    """A log4j2 config that writes the broker log to ``server_log``, not the console."""
    return "\n".join(
        [
            "status = warn",
            "shutdownHook = disable",  # else log4j stops before Kafka's own shutdown hook logs
            "name = streams-core-local-broker",
            "appender.file.type = File",
            "appender.file.name = FILE",
            f"appender.file.fileName = {server_log}",
            "appender.file.append = true",
            "appender.file.layout.type = PatternLayout",
            "appender.file.layout.pattern = [%d] %p %m (%c)%n",
            "rootLogger.level = INFO",
            "rootLogger.appenderRef.file.ref = FILE",
            "logger.statechange.name = state.change.logger",
            "logger.statechange.level = WARN",
            "logger.request.name = kafka.request.logger",
            "logger.request.level = WARN",
            "",
        ]
    )
