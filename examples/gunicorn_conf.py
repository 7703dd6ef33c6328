"""gunicorn settings that embed a redflow worker in each gevent worker process.

    gunicorn -c examples/gunicorn_conf.py -b 127.0.0.1:8000 examples.web_app:app

The redflow worker starts after gunicorn has forked and monkey-patched the
process (``post_worker_init``), never in the master, and stops in
``worker_exit``, after gunicorn has drained the HTTP server on SIGTERM:
runs in flight get ``graceful_timeout`` seconds to finish. Do not use
``--preload``: the app would be imported in the master before gevent patches.
"""

import logging

worker_class = "gevent"
workers = 1
graceful_timeout = 30
control_socket_disable = True  # gunicorn >= 25: its default path is shared by every gunicorn of the user


def post_worker_init(worker):
    from examples.web_app import start_embedded_worker

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")  # redflow's own logs
    worker.redflow_worker = start_embedded_worker()


def worker_exit(server, worker):
    redflow_worker = getattr(worker, "redflow_worker", None)
    if redflow_worker is not None:
        redflow_worker.stop(timeout=worker.cfg.graceful_timeout)
