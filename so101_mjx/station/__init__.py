"""The arm evaluation interface (spec, observation, joint pose, action chunks) and its simulated station."""
