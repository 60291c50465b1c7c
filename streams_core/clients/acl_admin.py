"""ACLs over aiokafka: create and delete ACL bindings (Kafka's `Admin.createAcls` / `deleteAcls`).

aiokafka 0.14 has the CreateAcls and DeleteAcls protocol messages but no admin methods for them;
`AclAdmin` sends them. Used to set up least-privilege principals (docs/security.md) in tests, by
the local broker's users and by `python -m streams_core.tools acls`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import Final, Self

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import for_code
from aiokafka.protocol.admin import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest

from streams_core.clients.client_config import admin_kwargs
from streams_core.config import StreamsConfig
from streams_core.errors import StreamsError

__all__ = ["AclAdmin", "AclBinding", "AclError"]

RESOURCE_TYPES: Final = {"TOPIC": 2, "GROUP": 3, "CLUSTER": 4, "TRANSACTIONAL_ID": 5}
PATTERN_TYPES: Final = {"LITERAL": 3, "PREFIXED": 4}
OPERATIONS: Final = {
    "ALL": 2, "READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7, "DESCRIBE": 8,
    "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11, "IDEMPOTENT_WRITE": 12,
}  # fmt: skip
PERMISSIONS: Final = {"DENY": 2, "ALLOW": 3}


class AclError(StreamsError):
    """The broker refused to create or delete an ACL."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: `principal` (`User:alice`) may (`ALLOW`) do `operation` on a resource.

    `resource_type` is TOPIC, GROUP, CLUSTER (name `kafka-cluster`) or TRANSACTIONAL_ID;
    `pattern` LITERAL or PREFIXED (the name is then a prefix, e.g. the application id).
    """

    principal: str
    resource_type: str
    name: str
    operation: str
    pattern: str = "LITERAL"
    host: str = "*"
    permission: str = "ALLOW"

    def __post_init__(self) -> None:
        for value, table in (
            (self.resource_type, RESOURCE_TYPES),
            (self.pattern, PATTERN_TYPES),
            (self.operation, OPERATIONS),
            (self.permission, PERMISSIONS),
        ):
            if value not in table:
                raise ValueError(f"{value!r} is not one of {', '.join(table)}")

    def __str__(self) -> str:
        prefix = " (prefix)" if self.pattern == "PREFIXED" else ""
        return f"{self.principal} {self.permission} {self.operation} on {self.resource_type} {self.name!r}{prefix}"

    def _fields(self) -> tuple[int, str, int, str, str, int, int]:
        return (
            RESOURCE_TYPES[self.resource_type],
            self.name,
            PATTERN_TYPES[self.pattern],
            self.principal,
            self.host,
            OPERATIONS[self.operation],
            PERMISSIONS[self.permission],
        )


class _AclAdminClient(AIOKafkaAdminClient):  # type: ignore[misc]
    """aiokafka's admin client with the two ACL requests it lacks."""

    async def create_acl(self, binding: AclBinding) -> None:
        response = await self._send_request(CreateAclsRequest(*binding._fields()))
        for error_code, message in response.creation_responses:
            if error_code:
                raise AclError(f"cannot create the ACL {binding}: {for_code(error_code).__name__} {message or ''}")

    async def has_acl(self, binding: AclBinding) -> bool:
        """Whether the broker's authorizer holds `binding` (DescribeAcls answers from its cache)."""
        response = await self._send_request(DescribeAclsRequest(*binding._fields()))
        if response.error_code:
            raise AclError(f"cannot describe the ACL {binding}: {for_code(response.error_code).__name__}")
        return any(acls for *_, acls in response.resources)

    async def delete_acl(self, binding: AclBinding) -> int:
        response = await self._send_request(DeleteAclsRequest(*binding._fields()))
        deleted = 0
        for error_code, message, matching in response.filter_responses:
            if error_code:
                raise AclError(f"cannot delete the ACL {binding}: {for_code(error_code).__name__} {message or ''}")
            deleted += len(matching)
        return deleted


class AclAdmin:
    """Create and delete ACLs as the principal `config` connects as (a super user, or one with
    ALTER on the cluster)."""

    def __init__(self, config: StreamsConfig) -> None:
        self._admin = _AclAdminClient(**admin_kwargs(config, client_id=f"{config['application.id']}-acl-admin"))

    async def __aenter__(self) -> Self:
        await self._admin.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        await self._admin.close()

    async def create(self, bindings: Iterable[AclBinding], *, timeout_s: float = 15.0) -> None:
        """Create the ACLs (an existing identical ACL is fine) and return once the broker's
        authorizer holds every one: KRaft applies a created ACL asynchronously, so a client
        connecting right after CreateAcls may still be refused."""
        created = list(bindings)
        for binding in created:
            await self._admin.create_acl(binding)
        deadline = asyncio.get_running_loop().time() + timeout_s
        for binding in created:
            while not await self._admin.has_acl(binding):
                if asyncio.get_running_loop().time() > deadline:
                    raise AclError(f"the ACL {binding} was created but the authorizer did not show it within {timeout_s} s")
                await asyncio.sleep(0.05)

    async def delete(self, bindings: Iterable[AclBinding]) -> int:
        """Delete the ACLs; returns how many the broker removed."""
        return sum([await self._admin.delete_acl(binding) for binding in bindings])
