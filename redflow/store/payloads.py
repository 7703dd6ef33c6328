"""The values runs carry, as the store holds them: one place encodes and decodes them.

Inputs, outputs, errors, step outputs, event payloads and progress values
are stored as JSON text in hash fields (DATA_MODEL.md). The client, the
engine and the inline test runner write and read them through
:class:`Payloads` (``Store.payloads``; the inline runner makes its own), so
that how a payload is stored can change in one place: a reference to a
payload kept under a key of its own (the asyncio package's ``@blob:``
values) is written and resolved here. Whole records read for people
(``Run.from_hash``, ``Step.from_json``: listings, the dashboard) decode in
``core/models.py`` from the text this module's readers hand over.
"""

from __future__ import annotations

from typing import Any

from redflow.core import codec
from redflow.core.errors import InputValidationError, SerializationError


class Payloads:
    """Encode and decode run payloads (see the module docstring)."""

    __slots__ = ()

    def dumps(self, value: Any, *, what: str = "value") -> str:
        """``value`` as stored; :class:`SerializationError` naming the path of what JSON refuses."""
        return codec.dumps(value, what=what)

    def loads(self, raw: str | None, *, what: str) -> Any:
        """A stored payload's value (``None`` for a missing field);
        :class:`CorruptDataError` naming ``what`` when it does not decode."""
        return None if raw is None else codec.loads(raw, what=what)

    def try_loads(self, raw: str | None) -> Any:
        """:meth:`loads`, with ``None`` for what does not decode (optional fields)."""
        return codec.try_loads(raw)

    def dumps_error(self, error: BaseException, *, with_stack: bool = True) -> str:
        """The ``errorJson`` of ``error``."""
        return codec.dumps_error(error, with_stack=with_stack)

    def input_json(self, value: Any, workflow: str) -> str:
        """A run's input as stored: :class:`InputValidationError` when JSON cannot hold it."""
        try:
            return codec.dumps(value, what="input")
        except SerializationError as exc:
            raise InputValidationError(f"input of workflow {workflow!r} is not JSON-serializable: {exc}") from exc

    def event_json(self, payload: Any, event: str) -> str:
        """An event's payload as stored: :class:`InputValidationError` when JSON cannot hold it."""
        try:
            return codec.dumps(payload)
        except SerializationError as exc:
            raise InputValidationError(f"payload of event {event!r} is not JSON-serializable: {exc}") from exc

    def signal_json(self, payload: Any, name: str) -> str:
        """A signal's payload as stored: :class:`InputValidationError` when JSON cannot hold it."""
        try:
            return codec.dumps(payload)
        except SerializationError as exc:
            raise InputValidationError(f"payload of signal {name!r} is not JSON-serializable: {exc}") from exc


#: The payloads of a store that writes none by reference (today, every store; the inline runner).
PLAIN = Payloads()
