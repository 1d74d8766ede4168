"""What the training and evaluation jobs share on the host: the loop around the jitted step,
the progress display and JAX's compilation cache."""
