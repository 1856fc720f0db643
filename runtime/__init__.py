"""Runtime: everything that touches a live JAX backend (timing, calibration, the jit hook)."""
