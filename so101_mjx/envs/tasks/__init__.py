"""One file per task; the registry registers the task classes defined here."""
