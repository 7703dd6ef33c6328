"""The asyncio ``redflow`` 0.1.9 side of tests/test_streams_interop.py: its
client's two stream readers, on a run a redflow-gevent worker streams.

Runs under ``.venv-redflow019/bin/python -I`` (never this repository's redflow),
printing JSON lines:

    get RUN_ID     get_run_stream: {"records": [{"attempt", "ts", "value"}, ...]}
    read RUN_ID    read_stream (live, replaying the run's items): {"record": ...} per item
                   as it comes, then {"end": true} when its reader stops (or {"none": true})
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from redflow import create_client


def emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


async def main(args: argparse.Namespace) -> None:
    client = create_client(url=args.url, prefix=args.prefix, app=None)
    if args.command == "get":
        emit(records=await client.get_run_stream(args.run_id, limit=1000))
    else:
        reader = await client.read_stream(args.run_id, block_ms=args.block_ms)
        if reader is None:
            emit(none=True)
        else:
            emit(reading=True)
            async for chunk in reader:
                emit(record=chunk.record)
            emit(end=True)
    await client.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="redflow019_streams")
    parser.add_argument("--url", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("command", choices=("get", "read"))
    parser.add_argument("run_id")
    parser.add_argument("--block-ms", type=int, default=30_000)
    asyncio.run(main(parser.parse_args(sys.argv[1:])))
