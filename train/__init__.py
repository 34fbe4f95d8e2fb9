"""Training entry points of the repository checkout: ``python -m train.ppo ...`` equals ``so101-mjx train ...``.

The training code is the installed package :mod:`so101_mjx.training`; this folder is not
installed (a user's own ``train.py`` cannot shadow the library).
"""
