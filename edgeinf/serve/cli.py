"""``edgeinf serve --config edgeinf.toml``: the HTTP service (docs/serve.md)."""

from __future__ import annotations


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("serve", help="serve models over HTTP: predict, health, metrics, reloads")
    p.add_argument("--config", required=True, help="the service's TOML file (see docs/serve.md)")
    p.add_argument("--host", help="listen on this address instead of the config's (beyond loopback: keys needed)")
    p.add_argument("--port", type=int, help="listen on this port instead of the config's (0: any free port)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..cli import UsageError
    from . import load_config
    from . import run as serve

    if args.port is not None and not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be from 0 to 65535, got {args.port}")
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise UsageError(f"edgeinf serve needs {exc.name}: pip install 'edgeinf[serve]'") from None
    config = load_config(args.config)
    serve(config, host=args.host, port=args.port)
    return 0
