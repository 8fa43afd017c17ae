"""A small stand-in of the Kubeflow Pipelines REST API (v2beta1) on localhost, for the
retraining CronJob's container: the real `kfp.Client` inside the image talks to it, and it
records every request it got (method, path, query, JSON body) for the test to check.

What it answers (what `kfp.Client` calls for `python -m pipelines.submit`, one run or a
recurring run): GET healthz; GET/POST experiments (by name filter, then create); POST
runs, GET runs/<id>; POST recurringruns, GET recurringruns/<id>; POST pipelines/upload (the
multipart body is recorded as bytes). Anything else: 404, recorded too. Each request's
headers are kept (`Request.headers`, names lower-cased): the tests check the bearer token
kfp's ServiceAccountTokenVolumeCredentials sends.
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

API = "/apis/v2beta1"


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any  # parsed JSON, or the raw bytes of a non-JSON body
    headers: dict[str, str] = field(default_factory=dict)  # names lower-cased

    @property
    def bearer(self) -> str | None:
        """The token of an `Authorization: Bearer <token>` header, else None."""
        scheme, _, token = self.headers.get("authorization", "").partition(" ")
        return token if scheme == "Bearer" and token else None


@dataclass
class KfpStandIn:
    requests: list[Request] = field(default_factory=list)
    experiments: dict[str, dict[str, Any]] = field(default_factory=dict)
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    recurring: dict[str, dict[str, Any]] = field(default_factory=dict)
    port: int = 0
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> KfpStandIn:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _reply(self, code: int, obj: Any) -> None:
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self, method: str) -> None:
                url = urlparse(self.path)
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body: Any = raw
                if "json" in (self.headers.get("Content-Type") or "") and raw:
                    body = json.loads(raw)
                headers = {k.lower(): v for k, v in self.headers.items()}
                query = parse_qs(url.query)
                standin.requests.append(Request(method, url.path, query, body, headers))
                code, obj = standin.answer(method, url.path, parse_qs(url.query), body)
                self._reply(code, obj)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

            def do_DELETE(self) -> None:
                self._handle("DELETE")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def answer(
        self, method: str, path: str, query: dict[str, list[str]], body: Any
    ) -> tuple[int, Any]:
        if path.endswith("/healthz"):
            return 200, {"commit_sha": "stand-in", "tag_name": "2.x-stand-in", "multi_user": False}
        if path == f"{API}/experiments" and method == "GET":
            wanted = None
            if flt := query.get("filter"):
                preds = json.loads(flt[0]).get("predicates", [])
                wanted = next((p.get("string_value", p.get("stringValue")) for p in preds), None)
            found = [e for e in self.experiments.values() if wanted in (None, e["display_name"])]
            return 200, {"experiments": found, "total_size": len(found)} if found else {}
        if path == f"{API}/experiments" and method == "POST":
            exp = {**body, "experiment_id": str(uuid.uuid4())}
            self.experiments[exp["experiment_id"]] = exp
            return 200, exp
        if path == f"{API}/runs" and method == "POST":
            run = {**body, "run_id": str(uuid.uuid4()), "state": "PENDING"}
            self.runs[run["run_id"]] = run
            return 200, run
        if path.startswith(f"{API}/runs/") and method == "GET":
            run_id = path.rsplit("/", 1)[-1]
            return (200, self.runs[run_id]) if run_id in self.runs else (404, {})
        if path == f"{API}/recurringruns" and method == "POST":
            job = {**body, "recurring_run_id": str(uuid.uuid4()), "status": "ENABLED"}
            self.recurring[job["recurring_run_id"]] = job
            return 200, job
        if path.startswith(f"{API}/recurringruns/") and method == "GET":
            job_id = path.rsplit("/", 1)[-1]
            return (200, self.recurring[job_id]) if job_id in self.recurring else (404, {})
        if path == f"{API}/pipelines/upload" and method == "POST":
            name = (query.get("name") or ["uploaded"])[0]
            return 200, {"pipeline_id": str(uuid.uuid4()), "display_name": name}
        return 404, {"error": f"the stand-in does not answer {method} {path}", "code": 5}
