"""Cost models and graph analyses: pure Python, numpy, scipy, scikit-learn; no MLIR or JAX."""
