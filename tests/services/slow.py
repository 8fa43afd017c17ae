"""A BentoML service with the production HTTP/1.1 connection (serving/connection.py) and
one slow endpoint: served for real by `python -m serving.launch serve` in tests that stop
servers (the drain) or speak raw HTTP to them, without training a champion first."""

from __future__ import annotations

import time

import bentoml

from serving.connection import install_http_guards


@bentoml.service(traffic={"timeout": 60})
class Slow:
    @bentoml.api(route="/slow")
    def slow(self, seconds: float = 0.0) -> dict[str, float]:
        time.sleep(seconds)
        return {"slept": seconds}


install_http_guards()
