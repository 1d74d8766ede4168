"""What runs report: the training step's estimators (``training``) and evaluation's
per-walker observables (``observables``)."""
