"""The training job: its state, Hartree-Fock pretraining, the jitted step, the whole job
(``job.train``) and ``--dry-run``."""
