"""MLIR passes over StableHLO modules; they extract OpInfo, call cost services and write attributes."""
