"""Training presets, one module per task: each defines ``ENV`` (the task name), ``PRESETS``
(``{name: Preset}``, a ``tiny`` one included) and ``DEFAULT`` (the preset ``so101-mjx train``
uses without ``--preset``: one that has been run). :mod:`so101_mjx.training.config` collects them.
"""
