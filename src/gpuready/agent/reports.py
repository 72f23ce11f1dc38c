"""What the agent tells the cluster: ``/healthz``, ``/readyz`` and ``/metrics`` over HTTP, and
node labels through Node Feature Discovery's local feature file. No Kubernetes API is asked.

- ``/healthz``: 200 while the agent runs.
- ``/readyz``: 200 only when the last pass verified over the CRI that containerd serves the
  runtime as the files say; 503 otherwise (and before the first pass ends).
- ``/metrics``: Prometheus's text format (``prometheus-client``): ``gpuready_restarts_total``,
  ``gpuready_verdict{gpuready_verdict=...}`` (the last pass's verdict) and
  ``gpuready_findings{severity=...}`` (doctor's findings of the last pass).
- The feature file (``/etc/kubernetes/node-feature-discovery/features.d/gpuready``): one
  ``label=value`` a line, which NFD's local source turns into node labels (NFD docs, "Local
  feature source": files in features.d, ``<name>=<value>`` lines; a name with a prefix of its
  own needs that namespace allowed with NFD's ``-extra-label-ns``).
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gpuready.agent.core import NOT_READY, VERDICTS, Verdict
from gpuready.agent.paths import FEATURE_FILE
from gpuready.node import Node

LABEL_PREFIX = "gpuready.io/"
SEVERITIES = ("error", "warning", "info")


class Status:
    """The last verdict and the counters, shared by the agent's loop and the HTTP threads."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Enum, Gauge

        self.lock = threading.Lock()
        self.verdict: Verdict | None = None
        self.registry = CollectorRegistry()
        self.restarts = Counter("gpuready_restarts", "containerd restarts the agent made",
                                registry=self.registry)
        self.state = Enum("gpuready_verdict", "the last pass's verdict", states=list(VERDICTS),
                          registry=self.registry)
        self.findings = Gauge("gpuready_findings", "doctor's findings of the last pass",
                              ["severity"], registry=self.registry)
        self.state.state("not-ready")
        for severity in SEVERITIES:
            self.findings.labels(severity=severity).set(0)

    def record(self, verdict: Verdict, *, restarts: int) -> None:
        """Take a pass's verdict; ``restarts``: how many it made."""
        with self.lock:
            self.verdict = verdict
            if restarts:
                self.restarts.inc(restarts)
            self.state.state(verdict.state)
            for severity in SEVERITIES:
                self.findings.labels(severity=severity).set(verdict.findings.get(severity, 0))

    def not_ready(self, detail: str) -> Verdict | None:
        """The last verdict made "not ready" (a pass found containerd not serving the files and
        is repairing); None before the first pass."""
        with self.lock:
            if self.verdict is None:
                return None
            self.verdict = self.verdict._replace(state=NOT_READY, detail=detail)
            self.state.state(NOT_READY)
            return self.verdict

    @property
    def ready(self) -> bool:
        """The last pass verified over the CRI."""
        with self.lock:
            return self.verdict is not None and self.verdict.ready

    def metrics(self) -> tuple[bytes, str]:
        """The metrics in Prometheus's text format, and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def labels(verdict: Verdict, *, runtime_name: str) -> dict[str, str]:
    """The node labels of ``verdict`` (each value a valid label value)."""
    found = {f"{LABEL_PREFIX}runtime.{runtime_name}": verdict.state,
             f"{LABEL_PREFIX}owner": verdict.owner,
             f"{LABEL_PREFIX}cdi": verdict.cdi}
    if verdict.line:
        found[f"{LABEL_PREFIX}containerd"] = verdict.line
    return found


def write_features(node: Node, verdict: Verdict, *, runtime_name: str) -> bool:
    """Write the feature file when its text changes (atomically); True when written."""
    from gpuready import fsio

    text = "".join(f"{key}={value}\n" for key, value in
                   sorted(labels(verdict, runtime_name=runtime_name).items()))
    path = node.path(FEATURE_FILE)
    path.parent.mkdir(parents=True, exist_ok=True)
    target = node.writable(path)
    if target.exists() and target.read_text(encoding="utf-8", errors="replace") == text:
        return False
    fsio.write_atomic(target, text.encode("utf-8"), mode=0o644)
    return True


def serve(status: Status, host: str, port: int) -> ThreadingHTTPServer:
    """Start the HTTP server in a thread; the server (``server_address`` has the port)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path == "/healthz":
                self._answer(200, b"ok\n", "text/plain")
            elif self.path == "/readyz":
                ready = status.ready
                with status.lock:
                    detail = status.verdict.detail if status.verdict else "no pass yet"
                body = f"{'ready' if ready else 'not ready'}: {detail}\n".encode()
                self._answer(200 if ready else 503, body, "text/plain")
            elif self.path == "/metrics":
                body, kind = status.metrics()
                self._answer(200, body, kind)
            else:
                self._answer(404, b"not found\n", "text/plain")

        def _answer(self, code: int, body: bytes, kind: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format, *args) -> None:  # noqa: A002 (http.server's name)
            return  # probes every few seconds: not worth a log line each

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="gpuready-http", daemon=True).start()
    return server
