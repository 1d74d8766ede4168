"""The jobs around the wavefunction: training (``train``: state, pretraining, the jitted
``step``, the host ``loop``), evaluation (``evaluate``, ``eval_step``, ``eval_report``),
and what they share: checkpoints, the run directory, progress and reports."""
