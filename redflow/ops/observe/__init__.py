"""Watching workers from outside: Prometheus metrics (``metrics``, the ``metrics``
extra), OpenTelemetry tracing (``otel``, the ``otel`` extra) and the command
line's log formats (``logs``). Nothing is imported here: each module is
imported by whoever wants it, so an extra not installed costs nothing."""
