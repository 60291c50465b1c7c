"""Security settings without a broker: JAAS parsing, the Java (Spark) properties, redaction,
token providers by name, the least-privilege ACL list, errors explained, and the local broker's
security configuration."""

from __future__ import annotations

import argparse
import stat
from pathlib import Path

import pytest
from aiokafka.abc import AbstractTokenProvider
from aiokafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError

from streams_core.broker.cli import add_security_arguments, security_from_arguments
from streams_core.broker.security import BrokerSecurity, SecurityMaterial
from streams_core.clients import AuthorizationError, explain, is_security_error
from streams_core.clients.client_config import consumer_kwargs, java_client_properties, producer_kwargs
from streams_core.clients.client_security import parse_jaas_config, token_provider
from streams_core.config import StreamsConfig
from streams_core.errors import ConfigError
from streams_core.tools.acls import application_acls
from streams_core.tools.command_config import read_properties

SECRET = "s3cret-Pw-0042"
SCRAM_JAAS = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="{SECRET}";'


def config(**props: object) -> StreamsConfig:
    return StreamsConfig({"application.id": "app", "bootstrap.servers": "127.0.0.1:9092", **props})


class Provider(AbstractTokenProvider):  # type: ignore[misc]
    async def token(self) -> str:
        return "t"


def test_sasl_jaas_config_gives_user_and_password() -> None:
    kwargs = consumer_kwargs(
        config(**{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": SCRAM_JAAS})
    )
    assert kwargs["sasl_plain_username"] == "alice" and kwargs["sasl_plain_password"] == SECRET
    assert parse_jaas_config("k", SCRAM_JAAS.replace('"alice"', "alice"))["sasl_plain_username"] == "alice"


@pytest.mark.parametrize(
    "jaas",
    [
        f'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required password="{SECRET}";',
        f'org.apache.kafka.common.security.plain.PlainLoginModule required password="{SECRET}";',
        f"not jaas {SECRET}",
    ],
)
def test_a_bad_jaas_config_is_an_error_that_hides_the_password(jaas: str) -> None:
    with pytest.raises(ConfigError) as info:
        producer_kwargs(config(**{"sasl.jaas.config": jaas}))
    assert info.value.key == "sasl.jaas.config" and SECRET not in str(info.value)


def test_the_config_repr_hides_secrets() -> None:
    text = repr(config(**{"sasl.plain.password": SECRET, "producer.sasl.jaas.config": SCRAM_JAAS, "ssl.password": SECRET}))
    assert SECRET not in text and "[hidden]" in text


def test_a_token_provider_by_its_dotted_name() -> None:
    for name in (f"{__name__}:Provider", f"{__name__}.Provider"):
        kwargs = consumer_kwargs(config(**{"sasl.mechanism": "OAUTHBEARER", "sasl.oauth.token.provider": name}))
        assert isinstance(kwargs["sasl_oauth_token_provider"], Provider)
    with pytest.raises(ConfigError):
        token_provider("sasl.oauth.token.provider", "os.path:join")


def test_java_properties_for_spark(tmp_path: Path) -> None:
    props = java_client_properties(
        config(**{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256", "sasl.plain.username": "al\"ice",
                  "sasl.plain.password": SECRET, "ssl.cafile": "/ca.pem"}), "consumer")  # fmt: skip
    assert props["bootstrap.servers"] == "127.0.0.1:9092" and props["security.protocol"] == "SASL_SSL"
    assert props["sasl.jaas.config"] == (
        f'org.apache.kafka.common.security.scram.ScramLoginModule required username="al\\"ice" password="{SECRET}";'
    )
    assert props["ssl.truststore.type"] == "PEM" and props["ssl.truststore.location"] == "/ca.pem"
    cert, key = tmp_path / "c.crt", tmp_path / "c.key"
    cert.write_text("CERT"), key.write_text("KEY")
    mtls = java_client_properties(
        config(**{"security.protocol": "SSL", "ssl.cafile": "/ca.pem", "producer.ssl.certfile": str(cert),
                  "producer.ssl.keyfile": str(key)}), "producer")  # fmt: skip
    assert mtls["ssl.keystore.type"] == "PEM" and mtls["ssl.keystore.certificate.chain"] == "CERT"
    assert mtls["ssl.keystore.key"] == "KEY" and "sasl.jaas.config" not in mtls
    assert java_client_properties(config(), "consumer") == {"bootstrap.servers": "127.0.0.1:9092"}
    with pytest.raises(ConfigError, match=r"sasl\.oauth\.token\.provider"):
        java_client_properties(
            config(**{"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                      "sasl.oauth.token.provider": Provider()}), "consumer")  # fmt: skip


def test_application_acls_per_guarantee() -> None:
    alos = {str(a) for a in application_acls("wc", "User:a", input_topics=["in"], output_topics=["out"])}
    assert alos == {
        "User:a ALLOW READ on TOPIC 'in'",
        "User:a ALLOW WRITE on TOPIC 'out'",
        "User:a ALLOW READ on TOPIC 'wc-' (prefix)",
        "User:a ALLOW WRITE on TOPIC 'wc-' (prefix)",
        "User:a ALLOW CREATE on TOPIC 'wc-' (prefix)",
        "User:a ALLOW READ on GROUP 'wc'",
    }
    eos = {str(a) for a in application_acls("wc", "User:a", input_topics=["in"], output_topics=["out"], exactly_once=True,
                                            create_internal_topics=False)}  # fmt: skip
    assert eos == alos - {"User:a ALLOW CREATE on TOPIC 'wc-' (prefix)"} | {
        "User:a ALLOW WRITE on TRANSACTIONAL_ID 'wc-' (prefix)"
    }


def test_authorization_errors_are_explained() -> None:
    cfg = config(**{"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.plain.username": "bob",
                    "sasl.plain.password": SECRET})  # fmt: skip
    group = explain(GroupAuthorizationFailedError("app"), cfg)
    assert isinstance(group, AuthorizationError) and str(group).startswith("User:bob is not authorized to READ GROUP 'app'")
    try:
        try:
            raise TopicAuthorizationFailedError("{'app-x-repartition'}")
        except TopicAuthorizationFailedError as exc:
            raise RuntimeError("cannot create topic 'app-x-repartition'") from exc
    except RuntimeError as exc:
        created = explain(exc, cfg)
    assert "CREATE TOPIC 'app-x-repartition'" in str(created) and SECRET not in str(created)
    assert is_security_error(created) and not is_security_error(ValueError("x"))
    plain = ValueError("not security")
    assert explain(plain, cfg) is plain


def test_command_config_properties(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text("# comment\nsecurity.protocol=SASL_SSL\n\nsasl.jaas.config = a b=c;\nssl.cafile: /ca.pem\n")
    assert read_properties(path) == {"security.protocol": "SASL_SSL", "sasl.jaas.config": "a b=c;", "ssl.cafile": "/ca.pem"}


def test_broker_security_validation_and_options() -> None:
    with pytest.raises(ValueError, match="ANONYMOUS"):
        BrokerSecurity(listeners=("PLAINTEXT",), authorizer=True)
    with pytest.raises(ValueError):
        BrokerSecurity(listeners=("TLS",))
    parser = argparse.ArgumentParser()
    add_security_arguments(parser)
    assert security_from_arguments(parser.parse_args([])) is None
    sec = security_from_arguments(parser.parse_args(["--listener", "SASL_SSL", "--scram-user", "a:pw", "--authorizer"]))
    assert sec is not None and sec.scram_users == {"a": "pw"} and sec.authorizer and sec.listeners == ("SASL_SSL",)


def test_broker_material_and_properties(tmp_path: Path) -> None:
    pytest.importorskip("trustme")
    sec = BrokerSecurity(listeners=("SASL_SSL", "SSL"), scram_users={"alice": SECRET}, certificate_users=("carol",),
                         ssl_client_auth=True, authorizer=True)  # fmt: skip
    material = SecurityMaterial(sec, tmp_path)
    material.prepare()
    for path in (material.key_file("carol"), material.broker_keystore, material.super_password_file):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert material.broker_keystore.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    props = material.server_properties({"SASL_SSL": 1, "SSL": 2, "CONTROLLER": 3}, "127.0.0.1")
    assert props["listeners"] == "SASL_SSL://127.0.0.1:1,SSL://127.0.0.1:2,CONTROLLER://127.0.0.1:3"
    assert props["listener.security.protocol.map"] == "SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:SSL"
    assert props["listener.name.ssl.ssl.client.auth"] == "required"
    assert props["listener.name.controller.ssl.client.auth"] == "required"
    assert props["super.users"] == "User:admin;User:broker"
    assert "SCRAM-SHA-512" in props["listener.name.sasl_ssl.sasl.enabled.mechanisms"]
    scram = material.format_arguments()
    assert f"SCRAM-SHA-512=[name=alice,iterations=4096,password={SECRET}]" in scram
    client = material.client_properties("SASL_SSL", user="alice")
    assert client["sasl.mechanism"] == "SCRAM-SHA-512" and client["sasl.plain.password"] == SECRET
    assert material.client_properties("SSL", user="carol")["ssl.certfile"].endswith("carol.crt")
