"""Data files shipped with the analysis package (calibrations)."""
