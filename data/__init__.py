"""Fingerprint sources: synthetic generator, real-dataset loaders, client partitions, verification pairs."""
