"""The HTTP service: a Starlette app on uvicorn.

Routes:
    POST /v1/models/{name}:predict   JSON tensors or an image body; answered with the outputs
    POST /v1/models/{name}:reload    load, verify, probe, swap (admin)
    GET  /v1/models                  specs, variants, sha256
    GET  /healthz                    the process answers
    GET  /readyz                     every model loaded, probed and with a live worker
    GET  /metrics                    Prometheus text

Model calls run on worker threads (`edgeinf.serve.workers`), decoding bodies and encoding
answers on the default thread pool; the event loop only reads bodies, admits, waits with
the deadline and writes answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import threading
import time
from functools import partial

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from ..errors import EdgeInfError, InputError
from ..metrics import CONTENT_TYPE
from . import codecs
from .auth import ADMIN, PREDICT, Authenticator, AuthError
from .config import ServeConfig, load_config
from .limits import RateLimiter
from .registry import ModelEntry, RollbackGuard, check_reload_request, default_loader, open_variant, reload_variants
from .stats import ServerStats
from .workers import DeadlineExceeded, Overloaded

log = logging.getLogger(__name__)

VARIANT_HEADER = "X-Model-Variant"
CLIENT_CLOSED = 499  # the client left before its answer (nginx's code), for the metrics only


class HTTPError(Exception):
    def __init__(self, status: int, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status = status
        self.headers = headers or {}


class Service:
    """The app's state: models, auth, limits, counters."""

    def __init__(self, config: ServeConfig, loader=None, seed: int | None = None):
        self.config = config
        self.loader = loader or default_loader
        self.seed = seed
        self.auth = Authenticator(config)
        self.limiter = RateLimiter(config.limits.rate_per_s, config.limits.burst)
        self.stats = ServerStats()
        self.models: dict[str, ModelEntry] = {}
        self.ready = False
        self.draining = False
        self.startup_error: BaseException | None = None
        self._reload_locks: dict[str, asyncio.Lock] = {}
        self._background: set = set()

    # -- lifetime --------------------------------------------------------------------------
    async def start(self) -> None:
        limits = self.config.limits
        for name, model in self.config.models.items():
            variants = {}
            try:
                for variant in model.variants:
                    variants[variant.name] = await asyncio.to_thread(open_variant, model, variant, limits, self.loader)
            except BaseException as exc:
                self.startup_error = exc  # `run` raises it once uvicorn has given up
                for v in variants.values():
                    v.pool.close()
                await asyncio.to_thread(self.stop_models)
                raise
            self.models[name] = ModelEntry(model, variants, seed=self.seed)
            self._reload_locks[name] = asyncio.Lock()
        self.ready = True
        if threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGHUP"):
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self._on_sighup)

    def stop_models(self) -> None:
        for entry in self.models.values():
            entry.close(self.config.drain_timeout_s)

    async def stop(self) -> None:
        self.draining = True
        self.ready = False
        if threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGHUP"):
            asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
        await asyncio.to_thread(self.stop_models)

    # -- requests -------------------------------------------------------------------------
    def identify(self, request: Request, scope: str):
        try:
            return self.auth.identify(request.headers, request.client.host if request.client else None, scope)
        except AuthError as exc:
            headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
            raise HTTPError(exc.status, str(exc), headers) from None

    def admit(self, identity) -> None:
        wait = self.limiter.retry_after(identity.key_id)
        if wait:
            raise HTTPError(429, "rate limit reached for this API key", {"Retry-After": str(wait)})

    def entry(self, name: str) -> ModelEntry:
        entry = self.models.get(name)
        if entry is None:
            raise HTTPError(404, f"no model {name!r}; this service has {sorted(self.models)}")
        return entry

    async def read_body(self, request: Request) -> bytes:
        limit = self.config.limits.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                raise HTTPError(400, f"Content-Length {declared!r} is not a number") from None
            if size > limit:
                raise HTTPError(413, f"the body has {size} bytes, more than the {limit} allowed")

        async def read() -> bytes:
            chunks, total = [], 0
            async for chunk in request.stream():
                total += len(chunk)
                if total > limit:
                    raise HTTPError(413, f"the body has more than the {limit} bytes allowed")
                chunks.append(chunk)
            return b"".join(chunks)

        try:
            return await asyncio.wait_for(read(), self.config.limits.body_timeout_s)
        except asyncio.TimeoutError:
            raise HTTPError(408, f"the body did not arrive within {self.config.limits.body_timeout_s} s") from None

    async def predict(self, request: Request, name: str) -> Response:
        identity = self.identify(request, PREDICT)  # before anything else: no model names to strangers
        entry = self.entry(name)
        self.admit(identity)
        body = await self.read_body(request)
        try:
            variant_name = entry.pick(request.headers.get(VARIANT_HEADER))
        except KeyError as exc:
            raise HTTPError(
                404, f"model {name!r} has no variant {exc.args[0]!r}; it has {sorted(entry.variants)}"
            ) from None
        request.state.variant = variant_name
        busy = HTTPError(503, f"{name}/{variant_name} is busy: its queue is full", {"Retry-After": "1"})
        pool = entry.variants[variant_name].pool
        if not pool.reserve():
            raise busy  # before decoding: a flood of images is refused cheaply
        try:
            call, encode = await asyncio.to_thread(self._decode, request, body, entry)  # JPEG, base64: off the loop
        except BaseException:  # a bad body, or the client left
            pool.unreserve()
            raise
        reserved = pool is entry.variants[variant_name].pool
        if not reserved:  # a reload swapped the variant while the body was decoded: queue on the new one
            pool.unreserve()
            pool = entry.variants[variant_name].pool
        try:
            job = pool.submit(call, reserved=reserved)
        except Overloaded:
            raise busy from None
        failed = True
        answer = asyncio.wrap_future(job.future)
        answer.add_done_callback(_retrieve)  # a call that ends after its 504 raises into nobody's hands
        try:
            outputs = await asyncio.wait_for(asyncio.shield(answer), pool.deadline_s)
            failed = False
        except asyncio.TimeoutError:
            pool.expire(job)
            raise HTTPError(504, f"{name}/{variant_name} did not answer within {pool.deadline_s:.3f} s") from None
        except DeadlineExceeded:
            raise HTTPError(504, f"{name}/{variant_name} did not start within {pool.deadline_s:.3f} s") from None
        except InputError as exc:
            failed = False  # the client's input, not the model's health
            raise HTTPError(422, str(exc)) from None
        except EdgeInfError as exc:
            raise HTTPError(500, f"{type(exc).__name__}: {exc}") from None
        finally:
            self._watch(entry, variant_name, pool, failed)
        payload = await asyncio.to_thread(encode, outputs)  # off the worker: it is free for the next call
        return Response(payload, media_type="application/json", headers={VARIANT_HEADER: variant_name})

    def _decode(self, request: Request, body: bytes, entry: ModelEntry):
        """``(call, encode)``: the model call a worker runs, and what makes its result the answer."""
        limits = self.config.limits
        kind = codecs.image_kind(request.headers.get("content-type", ""))
        try:
            if kind is not None:
                frame, color = codecs.decode_image(body, kind, request.query_params, limits.max_image_pixels)
                encoding = request.query_params.get("encoding", "list")
                if encoding not in ("list", "b64"):
                    raise codecs.RequestError(f'encoding must be "list" or "b64", got {encoding!r}')
                return image_call(frame, color, entry.config.image), partial(encode_image_answer, encoding=encoding)
            inputs, options = codecs.decode_json_request(body, max_elements=limits.max_body_bytes)
        except codecs.RequestError as exc:
            raise HTTPError(400, str(exc)) from None
        return tensor_call(inputs, options["dequantize"]), partial(codecs.encode_answer, encoding=options["encoding"])

    def _watch(self, entry: ModelEntry, variant: str, pool, failed: bool) -> None:
        guard = entry.guard
        if guard is None:
            return
        if guard.expired():
            entry.guard = None
            self._close_later(guard.old.values())
        elif guard.record(variant, pool, failed):
            entry.guard = None
            entry.swap(guard.old)
            entry.rollbacks += 1
            self.stats.reloads[(entry.config.name, "rolled_back")] += 1
            log.error("%s: errors spiked after the reload: the previous variants serve again", entry.config.name)
            self._close_later(guard.new.values())

    def _close_later(self, variants) -> None:
        pools = [v.pool for v in variants]
        timeout = self.config.drain_timeout_s

        def close():
            for pool in pools:
                pool.close(timeout)

        threading.Thread(target=close, name="edgeinf-serve-close", daemon=True).start()

    async def reload(self, name: str, overrides_body: dict) -> dict:
        entry = self.entry(name)
        try:
            names, overrides = check_reload_request(overrides_body, entry)
        except InputError as exc:
            raise HTTPError(400, str(exc)) from None
        async with self._reload_locks[name]:
            try:
                new = await asyncio.to_thread(reload_variants, entry, names, overrides, self.config.limits, self.loader)
            except Exception as exc:
                self.stats.reloads[(name, "refused")] += 1
                log.error("%s: reload refused, the current model keeps serving: %s", name, exc)
                raise HTTPError(422, f"reload refused, the current model keeps serving: {exc}") from None
            if entry.guard is not None:  # an earlier reload's old variants: that one is settled now
                self._close_later(entry.guard.old.values())
            old = entry.swap(new)
            entry.guard = RollbackGuard(old, new, self.config.rollback)
            entry.reloads += 1
            self.stats.reloads[(name, "swapped")] += 1
            log.info("%s: reloaded %s", name, ", ".join(f"{n} (sha256 {v.sha256[:12]})" for n, v in new.items()))
            return {"model": name, "reloaded": {n: v.describe() for n, v in new.items()}}

    def _on_sighup(self) -> None:
        task = asyncio.ensure_future(self.reload_from_file())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def reload_from_file(self) -> None:
        """SIGHUP: read the config file again and reload every model from it."""
        if self.config.source is None:
            log.warning("SIGHUP: no config file to read again; reloading the models from their paths")
            fresh = self.config
        else:
            try:
                fresh = await asyncio.to_thread(load_config, self.config.source)
            except InputError as exc:
                log.error("SIGHUP: the config cannot be read, nothing reloaded: %s", exc)
                return
        for name, entry in self.models.items():
            model = fresh.models.get(name)
            if model is None or [v.name for v in model.variants] != [v.name for v in entry.config.variants]:
                log.error("SIGHUP: model %s's variants changed in the file; restart to add or remove them", name)
                continue
            previous, entry.config = entry.config, model
            try:
                await self.reload(name, {})
            except HTTPError as exc:
                entry.config = previous  # the running variants keep their settings
                log.error("SIGHUP: %s", exc)


def _retrieve(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()


def tensor_call(inputs, dequantize: bool):
    """The worker's call for a tensor request (on a model or an A/B test)."""

    def call(target):
        return target.run(inputs, dequantize=dequantize)

    return call


def image_call(frame, color: str, image_options: dict):
    """The worker's call for an image request (on a model or an A/B test)."""
    image_options = dict(image_options)

    def call(target):
        if hasattr(target, "run_image"):
            return target.run_image(frame, color=color, **image_options)
        return target(frame, color=color, **image_options)  # an ABTest: it calls its arms with the frame

    return call


def encode_image_answer(outputs, encoding: str) -> bytes:
    """An image request's answer: the outputs, and the letterbox that maps boxes back to the image."""
    letterbox = getattr(outputs, "letterbox", None)
    extra = (
        None if letterbox is None else {"letterbox": {k: getattr(letterbox, k) for k in letterbox.__dataclass_fields__}}
    )
    return codecs.encode_answer(outputs, encoding, extra)


def _error(status: int, message: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"error": message, "code": status}, status_code=status, headers=headers)


def build_app(config: ServeConfig | str, *, loader=None, seed: int | None = None) -> Starlette:
    """The service as an ASGI app (run it with uvicorn, or `run`).

    Args:
        config: a `ServeConfig` or the path of its TOML file.
        loader: ``loader(path, model_config) -> Model`` (default: `edgeinf.load` with the
            model's backend and threads); tests put slow or failing models in through it.
        seed: seeds the weighted variant choice (reproducible splits).

    >>> app = build_app("edgeinf.toml")  # doctest: +SKIP
    """
    if not isinstance(config, ServeConfig):
        config = load_config(config)
    service = Service(config, loader=loader, seed=seed)

    async def guarded(request: Request, route: str, handler) -> Response:
        start = time.perf_counter()
        request.state.variant = ""
        model = request.path_params.get("target", "").rpartition(":")[0]
        model = model if model in service.models else ""  # a client's made-up name is no metric label
        service.stats.in_flight += 1
        try:
            response = await handler()
        except HTTPError as exc:
            response = _error(exc.status, str(exc), exc.headers)
            if request.state.variant:  # routed before it failed: say where
                response.headers[VARIANT_HEADER] = request.state.variant
        except ClientDisconnect:
            service.stats.observe(route, model, request.state.variant, CLIENT_CLOSED, None)
            return Response(status_code=400)  # nobody reads it
        finally:
            service.stats.in_flight -= 1
        elapsed = time.perf_counter() - start if response.status_code == 200 else None
        service.stats.observe(route, model, request.state.variant, response.status_code, elapsed)
        return response

    async def model_action(request: Request) -> Response:
        name, _, action = request.path_params["target"].rpartition(":")
        if action == "predict":
            return await guarded(request, "predict", lambda: service.predict(request, name))
        if action == "reload":
            return await guarded(request, "reload", lambda: reload(request, name))
        return _error(404, f"unknown action {action!r}: POST /v1/models/{{name}}:predict or :reload")

    async def reload(request: Request, name: str) -> Response:
        service.identify(request, ADMIN)
        service.entry(name)
        body = await service.read_body(request)
        try:
            overrides = json.loads(body) if body.strip() else {}
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise HTTPError(400, f"the body is not JSON: {exc}") from None
        if not isinstance(overrides, dict):
            raise HTTPError(400, 'expected a JSON object: {"variant", "path", "sha256"} (all optional)')
        return JSONResponse(await service.reload(name, overrides))

    async def list_models(request: Request) -> Response:
        async def handler():
            service.identify(request, PREDICT)
            return JSONResponse({"models": [entry.describe() for entry in service.models.values()]})

        return await guarded(request, "models", handler)

    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok\n")

    async def readyz(request: Request) -> Response:
        waiting = [
            f"{name}/{v}"
            for name, entry in service.models.items()
            for v, variant in entry.variants.items()
            if variant.pool.live_workers == 0
        ]
        if not service.ready or service.draining or waiting:
            reason = "draining" if service.draining else "loading" if not service.ready else f"no worker: {waiting}"
            return PlainTextResponse(f"not ready: {reason}\n", status_code=503)
        return PlainTextResponse("ready\n")

    async def prometheus(request: Request) -> Response:
        async def handler():
            service.identify(request, PREDICT)
            text = await asyncio.to_thread(service.stats.render, service.models)
            return Response(text, media_type=CONTENT_TYPE)

        return await guarded(request, "metrics", handler)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        await service.start()
        try:
            yield
        finally:
            await service.stop()

    app = Starlette(
        routes=[
            Route("/v1/models", list_models, methods=["GET"]),
            Route("/v1/models/{target}", model_action, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", prometheus, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    app.state.service = service
    return app
