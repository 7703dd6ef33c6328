"""Operating it: ``views`` (what Redis holds, read for people), ``control`` (what
operators change), ``format`` and ``shown`` (values in words), and over them the
rooms that use them: ``cli`` (the ``redflow-gevent`` command), ``dashboard``
(the web pages) and ``observe`` (metrics, tracing, log formats)."""
