"""The chaos suite (issue 5): faults, load and bad input against real redis-servers and worker subprocesses."""
