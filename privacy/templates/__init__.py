"""Protected templates for enrolled fingers: fuzzy vault, asymmetric secure sketches, password hardening.

Fang's thesis Ch. 6–7 (seed 002) and the fingerprint fuzzy vault of Nandakumar, Jain & Pankanti (2007).
One concept per module:

* :mod:`.field` — GF(2^m) arithmetic through ``galois``: batched Lagrange interpolation, hashing of polynomials;
* :mod:`.quantise` — minutia (x, y, direction) <-> 16-bit field element; embedding <-> integer levels;
* :mod:`.fuzzy_vault` — Juels–Sudan lock/unlock with chaff and a hash check, with the weighted (asymmetric,
  Ch. 6.3) variant as ``slots > 1``;
* :mod:`.chaff` — chaff the file cannot tell from genuine minutiae (directions matched to the helper given,
  genuine points spaced like chaff; issue 59);
* :mod:`.consistency` — the asymmetric setting: several enrolment impressions -> minutiae with weights;
* :mod:`.alignment` — orientation-field helper data (reveals the coarse ridge flow, no minutia) and registration;
* :mod:`.interval_sketch` — Ch. 6.2 asymmetric 1-D interval sketch (s2) and its entropy-loss bound;
* :mod:`.embedding_sketch` — the interval sketch per embedding dimension + a Reed–Solomon code offset;
* :mod:`.password` — Ch. 7 mixing of a PIN: key derivation, keyed minutia transform, helper-data masking;
* :mod:`.entropy` — the entropy-loss and brute-force bounds (weighted-vault sign error fixed);
* :mod:`.vault_template` — enrol / verify a finger with the vault end to end;
* :mod:`.template_file` — the versioned template file format.

Secrets, chaff and password salts come from OS entropy (``numpy.random.default_rng()`` seeded by the OS);
tests inject a generator through the Python API (``rng=``); no CLI option and nothing stored can set it.
"""
