"""BentoML's own request metrics labelled by route: a request to a made-up path counts
under `other`, so /metrics stays bounded (`bound_metric_labels`, installed by the service
before BentoML builds its app), and the access log sees the real path with its control
bytes escaped."""

from __future__ import annotations

import re
import typing as t

from starlette.types import ASGIApp as App
from starlette.types import Receive, Scope, Send

from serving.middleware import API_PATHS, PROBES

INFRA_PATHS = ("/", "/docs.json", "/schema.json", "/metrics", *PROBES)


def route_label(path: str) -> str:
    """A request's metric label: its route, or `other` (bounded, and no byte of a client's
    path reaches the exposition)."""
    if path in INFRA_PATHS or path.strip("/") in API_PATHS:
        return path
    from bentoml._internal.context import server_context

    if path in (server_context.service_routes or ()):  # an endpoint added later (a webhook)
        return path
    if path.startswith(("/static_content/", "/assets/")):
        return "/" + path.split("/", 2)[1]  # the Swagger page's files: one label a folder
    return "other"


def bound_metric_labels() -> None:
    """BentoML's request metrics (`r2a_request_total`, `_duration_seconds`, `_in_progress`)
    label each request with `scope["path"]`, so requests to made-up paths grew /metrics
    without bound (2,000 of them: 175 KB to 8.4 MB). Its middleware is the outermost and is
    looked up by name when the app is built (`_bentoml_impl/server/app.py`): replace it,
    before that, with one that sees the route label as the path and hands the real path on."""
    from bentoml._internal.server.http import instruments

    base = instruments.RunnerTrafficMetricsMiddleware
    if getattr(base, "r2a_bounded", False):
        return

    class BoundedTrafficMetrics(base):  # type: ignore[misc,valid-type]
        r2a_bounded = True

        def __init__(self, app: App, **kw: t.Any) -> None:
            super().__init__(_RealPath(app), **kw)

        def _setup(self, *args: t.Any, **kwargs: t.Any) -> None:
            """BentoML's series, and `other`'s for a 404 and a 401 made now: the first
            request to a made-up path then adds nothing to /metrics (its histogram added
            ~3.5 KB, the one step left)."""
            super()._setup(*args, **kwargs)
            from bentoml._internal.context import server_context as ctx

            names = {
                "service_name": ctx.bento_name,
                "service_version": ctx.bento_version,
                "runner_name": ctx.service_name,
            }
            self.metrics_request_in_progress.labels(endpoint="other", **names)
            for code in (404, 401):
                labels = {"endpoint": "other", "http_response_code": code, **names}
                self.metrics_request_total.labels(**labels)
                self.metrics_request_duration.labels(**labels)

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and scope["path"] != "/metrics":
                scope = {**scope, "path": route_label(scope["path"]), "r2a.path": scope["path"]}
            await super().__call__(scope, receive, send)

    instruments.RunnerTrafficMetricsMiddleware = BoundedTrafficMetrics  # type: ignore[misc,assignment]


class _RealPath:
    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if "r2a.path" in scope:
            # control bytes escaped: BentoML's access log writes the path as is, so a `%0A`
            # in it began a forged log line (no route has one: such a path is a 404 still)
            path = _CONTROL.sub(lambda m: f"%{ord(m[0]):02X}", scope["r2a.path"])
            scope = {**scope, "path": path}
            del scope["r2a.path"]
        await self.app(scope, receive, send)


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
