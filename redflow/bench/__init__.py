"""The ``redflow-gevent bench`` command and its parts."""
