"""``edgeinf serve``: models behind HTTP, with the habits of a production service.

A TOML config names the models (files or manifest names), their variants and the limits;
the service answers ``POST /v1/models/{name}:predict`` with JSON tensors or an image body,
and has ``/healthz``, ``/readyz``, ``/metrics`` and safe reloads. See docs/serve.md.

>>> import edgeinf.serve
>>> edgeinf.serve.run("edgeinf.toml")                  # doctest: +SKIP
>>> app = edgeinf.serve.build_app("edgeinf.toml")      # an ASGI app        # doctest: +SKIP

Starlette and uvicorn are imported by `build_app` and `run` only (``pip install
edgeinf[serve]``); importing this package needs neither.
"""

from __future__ import annotations

from .config import ServeConfig, load_config


def build_app(config, **options):
    """The service as a Starlette (ASGI) app; see `edgeinf.serve.app.build_app`."""
    from .app import build_app as build

    return build(config, **options)


def run(config, *, host: str | None = None, port: int | None = None, **options) -> None:
    """Serve until SIGINT or SIGTERM, then drain the requests in flight and stop.

    Args:
        config: a `ServeConfig` or the path of its TOML file.
        host, port: override the config's address (a non-loopback host needs API keys).
        **options: passed to `build_app` (``loader``, ``seed``).

    Raises:
        EdgeInfError: a model failed to load, verify or probe at startup (nothing was served).
    """
    import uvicorn

    if not isinstance(config, ServeConfig):
        config = load_config(config)
    if host is not None or port is not None:
        config = config.with_address(host, port)
    app = build_app(config, **options)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=config.host,
            port=config.port,
            log_level=config.log_level,
            timeout_graceful_shutdown=config.drain_timeout_s,
            lifespan="on",
        )
    )
    try:
        server.run()
    except SystemExit:  # uvicorn exits when the app's startup fails
        if server.started:
            raise
    if not server.started:  # the models did not load (uvicorn logged the traceback): say why
        error = app.state.service.startup_error
        if error is None:
            from ..errors import RuntimeFailure

            error = RuntimeFailure(f"the service could not start on {config.host}:{config.port}")
        raise error


__all__ = ["ServeConfig", "build_app", "load_config", "run"]
