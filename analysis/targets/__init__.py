"""Hardware descriptions (targets) as TOML data files."""
