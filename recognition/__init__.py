"""Using a trained verifier: embed, verify (1:1), evaluate (EER, FNMR at fixed FMR), identify (1:N)."""
