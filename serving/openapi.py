"""The service's OpenAPI document and Swagger page, as the front door (serving/middleware.py)
serves them: the document's title and description, the per-request batch bound and the
bearer key declared where BentoML's signatures cannot, and a Swagger page that loads only
the service's own files."""

from __future__ import annotations

import typing as t

from serving.requests import MAX_BATCH

SPEC_INFO = {
    "title": "R²Adapter",
    "version": "1",
    "description": "Routing, rewriting, retrieval and answers over HTTP: the endpoints, "
    "their bodies and the one error shape `{error, field}`.",
}
# BentoML's Swagger page (_bentoml_impl/server/main-openapi.html) loads Google Tag Manager
# from googletagmanager.com; this one loads only the service's own files, and says so
SWAGGER_PAGE = b"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<title>R2Adapter API</title>
<link rel="stylesheet" type="text/css" href="./static_content/swagger-ui.css">
<link rel="stylesheet" type="text/css" href="./static_content/index.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="./static_content/swagger-ui-bundle.js" charset="UTF-8"></script>
<script src="./static_content/swagger-ui-standalone-preset.js" charset="UTF-8"></script>
<script src="./static_content/swagger-initializer.js" charset="UTF-8"></script>
</body>
</html>
"""
SWAGGER_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)


def swagger_page() -> t.Any:
    from starlette.responses import Response

    headers = {
        "Content-Security-Policy": SWAGGER_CSP,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }
    return Response(SWAGGER_PAGE, media_type="text/html; charset=utf-8", headers=headers)


def document_batch_bounds(spec: dict[str, t.Any]) -> None:
    """BentoML batches /route_batch across requests, so its signature cannot carry the
    per-request bound that the middleware enforces: declare it here."""
    body = spec.get("paths", {}).get("/route_batch", {}).get("post", {}).get("requestBody", {})
    schema = body.get("content", {}).get("application/json", {}).get("schema", {})
    if "queries" in schema.get("properties", {}):
        schema["properties"]["queries"].update(minItems=1, maxItems=MAX_BATCH)


def document_auth(spec: dict[str, t.Any], endpoints: t.Iterable[str]) -> None:
    """The bearer key, on the endpoints that need it (with the key set at start)."""
    schemes = spec.setdefault("components", {}).setdefault("securitySchemes", {})
    schemes["bearer"] = {"type": "http", "scheme": "bearer"}
    for endpoint in endpoints:
        for op in spec.get("paths", {}).get(f"/{endpoint}", {}).values():
            if isinstance(op, dict):
                op["security"] = [{"bearer": []}]
