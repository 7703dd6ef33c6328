"""Large payloads in the asyncio ``redflow`` package's form (redflow/core/blobs.py):
a JSON text over the threshold is a ``@blob:v1:<sha1>`` reference to a field of
the run's blob hash, gzip+base64 when that is shorter; either side reads what
the other wrote. (tests/test_interop_redflow019.py checks the same against
the real package.)"""

import base64
import gzip
import os

import orjson
import pytest

from redflow.core import blobs
from redflow.core.errors import CorruptDataError, MissingBlobError

RUN = "run_8c1e7c3a-1f2b-4d3c-9a4b-5e6f7a8b9c0d"
#: Compact JSON of 1,097 bytes that compresses well (a list of numbers).
NUMBERS = orjson.dumps({"n": list(range(300))}).decode()


def stored_and_blobs(text: str, threshold: int | None = 1024) -> tuple[str, dict[str, str | None]]:
    stored = blobs.encode(text, threshold)
    return stored.value, dict([stored.blob]) if stored.blob else {}


def test_a_payload_over_the_threshold_is_a_reference_to_its_blob_and_reads_back():
    value, blob_hash = stored_and_blobs(NUMBERS)
    assert value == "@blob:" + blobs.field_for(NUMBERS) and list(blob_hash) == [blobs.field_for(NUMBERS)]
    assert blobs.resolve(value, blob_hash, run_id=RUN, field="inputJson") == NUMBERS


def test_the_blob_field_is_the_sha1_name_the_asyncio_package_gives_it():
    # computed by redflow 0.1.9's _blob_field_for_json
    assert blobs.field_for('{"text":"éééééééééé"}') == "v1:KiRkb7wkDCm22wS6H9rjlpSPgnM"
    assert blobs.field_for(NUMBERS) == "v1:w1TEX53fRnV29OLghznPk_pku-4"


def test_the_threshold_counts_utf8_bytes_and_a_payload_of_exactly_the_threshold_stays_inline():
    exactly = '"' + "a" * 1022 + '"'
    assert len(exactly.encode()) == 1024 and blobs.encode(exactly, 1024).value == exactly
    assert blobs.encode('"' + "a" * 1023 + '"', 1024).blob is not None
    accents = '"' + "é" * 600 + '"'  # 602 characters, 1,202 bytes
    assert blobs.encode(accents, 1024).blob is not None


def test_without_a_threshold_every_payload_stays_inline():
    assert blobs.encode(NUMBERS, None) == blobs.Stored(NUMBERS)


def test_a_blob_is_gzip_and_base64_when_that_is_shorter_and_the_json_itself_otherwise():
    _, compressible = stored_and_blobs(NUMBERS)
    (gzipped,) = compressible.values()
    assert gzipped is not None and gzipped.startswith("@gzip:b64:") and len(gzipped) < len(NUMBERS)
    noise = orjson.dumps(base64.b64encode(os.urandom(1500)).decode()).decode()  # does not compress below base64's growth
    _, incompressible = stored_and_blobs(noise)
    assert list(incompressible.values()) == [noise]


def test_blobs_written_by_the_asyncio_package_are_read_gzip_or_plain():
    # its writer: gzip.compress at the default level, with the current time in the header
    theirs = "@gzip:b64:" + base64.b64encode(gzip.compress(NUMBERS.encode(), mtime=1_700_000_000)).decode()
    ref = "@blob:" + blobs.field_for(NUMBERS)
    assert blobs.resolve(ref, {blobs.field_for(NUMBERS): theirs}, run_id=RUN, field="outputJson") == NUMBERS
    assert blobs.resolve(ref, {blobs.field_for(NUMBERS): NUMBERS}, run_id=RUN, field="outputJson") == NUMBERS  # 0.0.12-0.0.15: plain


def test_inline_payloads_resolve_to_themselves_without_any_blob():
    for inline in ('{"a":1}', "null", '"@blob:v1:x"', "__redflow_undefined_raw__:v1"):
        assert blobs.resolve(inline, {}, run_id=RUN, field="inputJson") == inline


def test_a_reference_to_a_missing_blob_is_an_error_naming_the_run_the_field_and_the_reference():
    ref = "@blob:" + blobs.field_for(NUMBERS)
    with pytest.raises(MissingBlobError) as caught:
        blobs.resolve(ref, {blobs.field_for(NUMBERS): None}, run_id=RUN, field="inputJson")
    assert isinstance(caught.value, CorruptDataError)
    assert (caught.value.run_id, caught.value.field, caught.value.ref) == (RUN, "inputJson", ref)
    assert RUN in str(caught.value) and "inputJson" in str(caught.value) and ref in str(caught.value)


NOT_BASE64, NOT_GZIP, NOT_UTF8 = b"!!", base64.b64encode(b"not gzip"), base64.b64encode(gzip.compress(b"\xff\xfe"))


# ids: gzip stamps the time in its header, and every pytest-xdist process must collect the same test ids
@pytest.mark.parametrize(
    "blob", ["@gzip:b64:" + raw.decode() for raw in (NOT_BASE64, NOT_GZIP, NOT_UTF8)], ids=["not-base64", "not-gzip", "not-utf8"]
)
def test_a_blob_that_does_not_decode_is_corrupt_data_naming_the_run(blob):
    with pytest.raises(CorruptDataError, match=RUN):
        blobs.resolve("@blob:v1:x", {"v1:x": blob}, run_id=RUN, field="outputJson")


def test_the_blob_fields_of_some_values_are_listed_once_each_in_order():
    assert blobs.blob_fields_of(["@blob:v1:b", '{"a":1}', None, "@blob:v1:a", "@blob:v1:b", "", "@blob:"]) == ["v1:b", "v1:a"]
