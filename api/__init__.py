"""The REST layer: interactive queries and discovery over HTTP for a KafkaStreams instance.

    app = create_app(streams)                      # a FastAPI app (docs/rest-api.md)
    handle = await serve(streams, "127.0.0.1")     # uvicorn on application.server's port, same loop
    ...
    await handle.stop()

    run(streams)                                   # or all in one call: start, serve, close on SIGTERM

`openapi.yaml` at the repository root is the contract; docs/rest-api.md explains the routes.
"""

from api.app import create_app
from api.auth import Credentials, Principal
from api.runner import run, serve_until_signal
from api.secrets import Secret
from api.server import BindError, ServerHandle, serve
from api.settings import ApiSettings
from api.tls import TlsSettings

__all__ = [
    "ApiSettings",
    "BindError",
    "Credentials",
    "Principal",
    "Secret",
    "ServerHandle",
    "TlsSettings",
    "create_app",
    "run",
    "serve",
    "serve_until_signal",
]
