"""Identification of the servo model (:mod:`so101_mjx.sim.servo`) from recorded commands and measured positions.

:mod:`~so101_mjx.sysid.excitation` makes the commands (each motor in turn), ``so101-mjx deploy excitation``
sends them to a follower (real or simulated) and logs a LeRobotDataset, :mod:`~so101_mjx.sysid.dataset`
reads it, :mod:`~so101_mjx.sysid.fit` fits each motor's parameters in the batched simulator, and
``so101-mjx sysid`` (:mod:`~so101_mjx.sysid.command`) writes the fit as the env config's ``servo_model``.
"""
