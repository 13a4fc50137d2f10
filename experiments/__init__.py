"""Shipped experiments (``*.toml``), installed with FedPrint as package data so that ``fedprint demo`` and
``--config NAME`` work from a plain ``pip install``; see :mod:`fedprint.config.shipped`."""
