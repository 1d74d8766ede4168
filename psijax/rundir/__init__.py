"""A run directory's files: checkpoints, training's and evaluation's metrics and summaries,
their plots, and ``psijax report``."""
