"""Demonstrations: ``so101-mjx record`` and its LeRobotDataset v3.0 writer."""
