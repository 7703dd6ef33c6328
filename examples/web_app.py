"""A tiny WSGI app with a redflow worker embedded in the same process.

    POST /runs      {"name": "Ada"}  -> 202 {"id": "run_..."}     starts a "greet" run
    GET  /runs/<id>[?wait=5]          -> {"id", "status", "output", "error"}

Under gevent's own WSGI server (the worker stops with the server on SIGTERM/SIGINT):

    python examples/web_app.py --port 8000

Under gunicorn's gevent workers (one redflow worker per gunicorn worker process,
started and stopped by the hooks in examples/gunicorn_conf.py):

    gunicorn -c examples/gunicorn_conf.py -b 127.0.0.1:8000 examples.web_app:app

Redis comes from ``REDIS_URL`` and the key prefix from ``REDFLOW_PREFIX``.
"""

from gevent import monkey

monkey.patch_all()  # first thing; a no-op under gunicorn -k gevent, which has patched already

import argparse  # noqa: E402
import logging  # noqa: E402
import signal  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any
from urllib.parse import parse_qs  # noqa: E402

import gevent  # noqa: E402
import orjson  # noqa: E402
from gevent.pywsgi import WSGIServer  # noqa: E402

from redflow import InputValidationError, Registry, TimeoutError, Worker, create_client, define_workflow, start_worker  # noqa: E402

registry = Registry()
log = logging.getLogger("examples.web_app")


def greet_schema(value: Any) -> Any:
    if not isinstance(value, dict) or not isinstance(value.get("name"), str) or not value["name"]:
        raise ValueError("input needs a non-empty string 'name'")
    return {"name": value["name"], "pause_s": float(value.get("pause_s", 0))}


@define_workflow("greet", registry=registry, schema=greet_schema)
def greet(ctx):
    greeting = ctx.step.run("compose", lambda: f"Hello, {ctx.input['name']}!")
    ctx.step.run("pause", lambda: gevent.sleep(ctx.input["pause_s"]))  # stands for slow I/O
    return {"greeting": greeting, "shouted": ctx.step.run("shout", lambda: greeting.upper())}


_client = None


def client():
    """One client per process, made on first use (after gunicorn has forked)."""
    global _client
    if _client is None:
        _client = create_client(registry=registry)
    return _client


def start_embedded_worker(concurrency: int = 10) -> Worker:
    return start_worker(registry, concurrency=concurrency)


def _json(start_response: Callable[..., Any], status: str, body: Any) -> list[bytes]:
    data = orjson.dumps(body)
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
    return [data]


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
    method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
    if method == "POST" and path == "/runs":
        try:
            body = orjson.loads(environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0)) or b"null")
            handle = client().run(greet, body)
        except (orjson.JSONDecodeError, InputValidationError) as exc:
            return _json(start_response, "400 Bad Request", {"error": str(exc)})
        return _json(start_response, "202 Accepted", {"id": handle.id})
    if method == "GET" and path.startswith("/runs/"):
        run_id = path[len("/runs/") :]
        wait = parse_qs(environ.get("QUERY_STRING", "")).get("wait", ["0"])[0]
        if not wait.replace(".", "", 1).isdigit():
            return _json(start_response, "400 Bad Request", {"error": "wait must be a number of seconds"})
        run = client().get_run(run_id)
        if run is None:
            return _json(start_response, "404 Not Found", {"error": f"no run {run_id}"})
        if float(wait) > 0 and not run.is_terminal:
            try:
                client().wait_for(run_id, timeout=min(float(wait), 30.0))
            except TimeoutError:
                pass  # not finished yet: answer with its current status
            run = client().get_run(run_id)
        return _json(start_response, "200 OK", {"id": run.id, "status": run.status, "output": run.output, "error": run.error})
    return _json(start_response, "404 Not Found", {"error": "POST /runs or GET /runs/<id>"})


def main() -> int:
    parser = argparse.ArgumentParser(description="the example app under gevent.pywsgi, with an embedded worker")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--grace", type=float, default=30.0, help="seconds the worker waits for runs in flight on stop")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    server = WSGIServer((args.host, args.port), app)
    server.start()  # bind first: a port in use fails before the worker starts
    worker = start_embedded_worker()

    def stop() -> None:
        log.info("stopping: the server first, then the worker (up to %.0fs for runs in flight)", args.grace)
        server.stop(timeout=5)
        worker.stop(timeout=args.grace)

    for signum in (signal.SIGTERM, signal.SIGINT):
        gevent.signal_handler(signum, gevent.spawn, stop)
    log.info("serving on http://%s:%d", args.host, server.server_port)
    server.serve_forever()
    worker.join()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
