"""The REST layer: interactive queries and discovery over HTTP for a KafkaStreams instance.

    app = create_app(streams)                      # a FastAPI app (docs/rest-api.md)
    handle = await serve(streams, "127.0.0.1")     # uvicorn on application.server's port, same loop
    ...
    await handle.stop()

`openapi.yaml` at the repository root is the contract; docs/rest-api.md explains the routes.
"""

from api.app import create_app
from api.server import ServerHandle, serve
from api.settings import ApiSettings

__all__ = ["ApiSettings", "ServerHandle", "create_app", "serve"]
