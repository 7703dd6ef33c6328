"""Pure data: keys, codec, errors, retry, models, clock (no I/O)."""
