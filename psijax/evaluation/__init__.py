"""The evaluation job: frozen parameters, a long MCMC chain, observables with error bars."""
