"""Operating it: the CLI, admin commands, dashboard, metrics, logs."""
