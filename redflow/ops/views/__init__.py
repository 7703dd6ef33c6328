"""What Redis holds, read for people: queues, cron triggers, workers, flow
control and per-workflow figures. Read-only, and shared by the commands, the
dashboard and the metrics, so that they say the same things."""
