"""Validation of client train replies before they reach an aggregation rule.

A Flower ``Message`` reply is untrusted input: a crashed or malicious client can send NaN weights, a model of
another architecture, or metrics without the keys the strategy needs. Flower's own consistency check
(``validate_message_reply_consistency``) raises ``InconsistentMessageReplies`` and drops the whole round; here
each reply is judged on its own so a strategy can skip the bad ones, log why, and aggregate the rest.

The checks are pure (Flower records + numpy) so the AFFR strategy and the baseline strategies share them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
from flwr.app import ArrayRecord, RecordDict


def _scalar_metric(value: object) -> float | None:
    """Return ``value`` as a float when it is a real scalar (bool excluded), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        return None
    return float(value)


def check_reply(
    content: RecordDict,
    reference_arrays: ArrayRecord | None,
    required_metric_keys: Iterable[str] = (),
    positive_metric_keys: Iterable[str] = (),
    expect_arrays: bool = True,
    decoded: dict | None = None,
) -> str | None:
    """Judge one train reply; return the reason it must be rejected, or None when it is usable.

    Parameters
    ----------
    content : flwr.app.RecordDict
        Content of the reply ``Message`` (call only on replies without an error).
    reference_arrays : flwr.app.ArrayRecord or None
        The global model sent to the clients this round. The reply's single ArrayRecord must have exactly
        the same keys, and per key the same shape and dtype (declared and decoded). None skips this
        comparison (keys/shapes are then not checked; finiteness still is).
    required_metric_keys : iterable of str, default ()
        Keys that must be present in the reply's single MetricRecord as finite real scalars
        (e.g. the AFFR generalization gap and the FedAvg ``num-examples`` weight).
    positive_metric_keys : iterable of str, default ()
        Keys that must additionally be > 0 (a weight of 0 would make a weighted mean divide by zero).
        Each must also be listed in, or is implicitly added to, ``required_metric_keys``.
    expect_arrays : bool, default True
        True for train replies (exactly one ArrayRecord required and checked). False for evaluate replies,
        whose ArrayRecords (normally none) are ignored.
    decoded : dict, optional
        If given, receives the decoded numpy arrays by key, so an aggregator need not decode them again.

    Returns
    -------
    str or None
        Human-readable reason for rejection, or None when the reply passes every check:
        exactly one ArrayRecord; keys, shapes and dtypes equal to ``reference_arrays``; every floating or
        complex array entirely finite; exactly one MetricRecord (when any metric key is required) holding
        every required key as a finite scalar, positive where requested.
    """
    positive = list(positive_metric_keys)
    required = list(dict.fromkeys([*required_metric_keys, *positive]))

    reason = _check_arrays(content, reference_arrays, decoded) if expect_arrays else None
    if reason is not None:
        return reason
    return _check_metrics(content, required, positive)


def _check_arrays(content: RecordDict, reference_arrays: ArrayRecord | None,
                  decoded: dict | None = None) -> str | None:
    """Reason to reject the reply's single ArrayRecord, or None (see `check_reply`)."""
    array_records = content.array_records
    if len(array_records) != 1:
        return f"expected exactly one ArrayRecord, found {len(array_records)}"
    arrays = next(iter(array_records.values()))

    if reference_arrays is not None:
        got, want = set(arrays.keys()), set(reference_arrays.keys())
        if got != want:
            missing, extra = sorted(want - got), sorted(got - want)
            return f"array keys differ from the global model (missing {missing}, unexpected {extra})"

    for key, array in arrays.items():
        # Decoding untrusted bytes can fail in many ways (truncated buffer, pickled object, wrong stype);
        # any failure is a property of this reply, never a reason to stop the run.
        try:
            values = array.numpy()
        except Exception as exc:  # noqa: BLE001
            return f"array '{key}' cannot be decoded: {type(exc).__name__}: {exc}"
        if reference_arrays is not None:
            ref = reference_arrays[key]
            want_shape, want_dtype = tuple(ref.shape), str(ref.dtype)
            for what, shape, dtype in (("declared", tuple(array.shape), str(array.dtype)),
                                       ("decoded", tuple(values.shape), str(values.dtype))):
                if shape != want_shape:
                    return f"array '{key}' {what} shape {shape} differs from the global model's {want_shape}"
                if dtype != want_dtype:
                    return f"array '{key}' {what} dtype {dtype} differs from the global model's {want_dtype}"
        if np.issubdtype(values.dtype, np.inexact) and not np.all(np.isfinite(values)):
            n_bad = int(np.size(values) - np.count_nonzero(np.isfinite(values)))
            return f"array '{key}' has {n_bad} non-finite value(s) (NaN/Inf)"
        if decoded is not None:
            decoded[key] = values
    return None


def _check_metrics(content: RecordDict, required: list[str], positive: list[str]) -> str | None:
    """Reason to reject the reply's metrics, or None (see `check_reply`)."""
    if not required:
        return None
    metric_records = content.metric_records
    if len(metric_records) != 1:
        return f"expected exactly one MetricRecord, found {len(metric_records)}"
    metrics = next(iter(metric_records.values()))
    for key in required:
        if key not in metrics:
            return f"metric '{key}' is missing"
        value = _scalar_metric(metrics[key])
        if value is None:
            return f"metric '{key}' must be a real scalar, got {type(metrics[key]).__name__}"
        if not math.isfinite(value):
            return f"metric '{key}' is not finite ({value})"
        if key in positive and value <= 0:
            return f"metric '{key}' must be > 0, got {value}"
    return None
