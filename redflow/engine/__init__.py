"""The gevent worker: claim, lease, run, settle."""
