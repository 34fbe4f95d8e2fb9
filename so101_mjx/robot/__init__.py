"""The SO-101 itself: its scenes (MJCF models), forward kinematics and Jacobians, and gripper mappings."""
