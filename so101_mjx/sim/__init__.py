"""The physics seam: backends (MJX, MuJoCo C), the state contract, per-episode domain randomization."""
