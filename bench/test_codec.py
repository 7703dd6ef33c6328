"""The codec: every input, output and step record goes through it."""

from redflow.core import codec

RUN_INPUT = {
    "user": {"id": 12345, "email": "ada@example.com", "name": "Ada Lovelace", "tags": ["admin", "beta", "é"]},
    "items": [{"sku": f"sku-{i}", "qty": i, "price": 9.99 + i} for i in range(10)],
    "flags": {"dry_run": False, "priority": None},
}


def test_codec_round_trip_of_a_typical_run_input(benchmark):
    result = benchmark(lambda: codec.loads(codec.dumps(RUN_INPUT)))
    assert result == RUN_INPUT
