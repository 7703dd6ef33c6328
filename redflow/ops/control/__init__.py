"""What operators change, and what it did in words: one run (cancel, retry),
every run matching filters (bulk retry, cancel), cron triggers (pause, resume,
trigger now). The commands and the dashboard's buttons act through these, so
that they select, act and report alike."""
