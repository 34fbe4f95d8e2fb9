"""Rendering: single frames and videos, batched camera frames (MuJoCo C workers, MuJoCo Warp), visual randomization."""
