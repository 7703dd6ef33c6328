"""Large payloads as the asyncio ``redflow`` package (0.0.12 and later) stores them.

It keeps any JSON text over 1 KiB (UTF-8 bytes) out of the run hash: the
field holds a reference ``@blob:v1:<sha1>`` (the SHA-1 of the JSON text,
URL-safe base64 without padding) and the text itself goes into the hash
``P:run:<id>:blobs`` under the field ``v1:<sha1>``, gzip-compressed and
base64-encoded behind ``@gzip:b64:`` when that is shorter (0.0.25 and
later; 0.0.12 to 0.0.15 stored it plain). Inputs, outputs, errors, step
outputs and errors, wait-resume payloads and attempt traces all go through
it; event payloads use ``P:event:<id>:blobs`` the same way. The layout is
in docs/interop.md.

No I/O here: callers fetch the blob hash fields a value refers to
(:func:`blob_field_of`) and pass them in.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import re
import zlib
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from redflow.core.errors import CorruptDataError, MissingBlobError, RedflowError

#: What a stored value that refers to a blob starts with.
REF_PREFIX = "@blob:"
#: What a blob stored gzip-compressed and base64-encoded starts with.
GZIP_PREFIX = "@gzip:b64:"
#: Version tag of the blob field names.
FIELD_VERSION = "v1:"
#: The asyncio package's threshold: JSON text of more UTF-8 bytes than this goes to a blob.
DEFAULT_THRESHOLD_BYTES = 1024


class Stored(NamedTuple):
    """How one JSON text is stored: ``value`` goes into the run hash field;
    when it is a reference, ``blob`` is the ``(field, value)`` pair for the blob hash.
    (A tuple: one is made per run and per step, where a frozen dataclass costs more.)"""

    value: str
    blob: tuple[str, str] | None = None


def check_threshold(threshold_bytes: object) -> int | None:
    """A valid ``blob_threshold`` (bytes, >= 0, or None for never); :class:`RedflowError` otherwise."""
    if threshold_bytes is None:
        return None
    if isinstance(threshold_bytes, bool) or not isinstance(threshold_bytes, int) or threshold_bytes < 0:
        raise RedflowError(f"blob_threshold must be a number of bytes >= 0 or None, not {threshold_bytes!r}")
    return threshold_bytes


def blob_field_of(stored: str | None) -> str | None:
    """The blob hash field a stored value refers to, or None if it holds its JSON inline."""
    if not stored or not stored.startswith(REF_PREFIX):
        return None
    return stored[len(REF_PREFIX) :] or None


def blob_fields_of(values: Iterable[str | None]) -> list[str]:
    """The distinct blob hash fields some stored values refer to, in order (one HMGET fetches them)."""
    fields = (blob_field_of(value) for value in values)
    return list(dict.fromkeys(field for field in fields if field))


#: A reference inside a JSON text (a step record holds its output or error as a JSON string).
_REF_IN_JSON = re.compile(r'"(@blob:[^"\\]+)"')


def refs_in(record: str) -> list[str]:
    """The ``@blob:`` references a stored record (a step record: its output or
    error) holds, found without decoding it; none for almost every record."""
    return _REF_IN_JSON.findall(record) if REF_PREFIX in record else []


def field_for(json_text: str) -> str:
    """The blob hash field of a JSON text: ``v1:`` + URL-safe base64 of its SHA-1, unpadded."""
    digest = hashlib.sha1(json_text.encode("utf-8")).digest()  # noqa: S324 - a content address, as the asyncio package names blobs
    return FIELD_VERSION + base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def encode(json_text: str, threshold_bytes: int | None) -> Stored:
    """Store ``json_text`` inline, or as a reference to a blob when it has more
    than ``threshold_bytes`` UTF-8 bytes (``None``: never). The blob is the
    gzip+base64 form when that is shorter than the text, else the text itself
    (the asyncio package's rule, so either side reads what the other wrote)."""
    if threshold_bytes is None or 4 * len(json_text) <= threshold_bytes:  # (a character is at most 4 UTF-8 bytes)
        return Stored(json_text)
    raw = json_text.encode("utf-8")
    if len(raw) <= threshold_bytes or json_text.startswith(REF_PREFIX):
        return Stored(json_text)
    field = field_for(json_text)
    compressed = GZIP_PREFIX + base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")
    blob = compressed if len(compressed) < len(raw) else json_text
    return Stored(REF_PREFIX + field, (field, blob))


def decode_blob(value: str, *, what: str) -> str:
    """The JSON text of one blob hash value (gzip+base64 or plain); :class:`CorruptDataError` naming ``what``."""
    if not value.startswith(GZIP_PREFIX):
        return value
    try:
        return gzip.decompress(base64.b64decode(value[len(GZIP_PREFIX) :], validate=True)).decode("utf-8")
    except (binascii.Error, OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        raise CorruptDataError(f"{what}: the blob does not decode as gzip+base64 ({exc})") from None


def resolve(stored: str, blobs: Mapping[str, str | None], *, run_id: str, field: str) -> str:
    """The JSON text of a stored value: itself, or the blob it refers to.

    ``blobs`` maps blob fields to the values read from the run's blob hash
    (None for a field that is absent). ``field`` names the value (``inputJson``,
    ``step 'a' outputJson``, ...) in errors: a reference to a blob that is not
    there is a :class:`MissingBlobError` naming the run."""
    blob_field = blob_field_of(stored)
    if blob_field is None:
        return stored
    value = blobs.get(blob_field)
    if value is None:
        raise MissingBlobError(run_id, field, stored)
    return decode_blob(value, what=f"run {run_id} {field} ({stored})")
