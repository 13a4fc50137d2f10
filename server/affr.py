"""AFFR aggregation: FedAvg with generalization-adjusted client weights (Yan et al. 2025, Alg. 1, Eqs. 5-7).

Every round each client receives the global model θ_g^t, measures its generalization gap G_i on its
validation split (Eq. 5), trains locally and returns θ_i together with G_i (MetricRecord key ``gap_key``).
The server moves the aggregation weights α towards the clients with the larger gap and aggregates
θ_g^{t+1} = Σ_i α_i θ_i.

Weight rule. The paper's printed Eq. 7 is mis-parenthesised: it divides the previous weight α_i^{t-1} by
max_j(G_j − μ) as well. We implement the rule of the method Eq. 7 cites (FedDG-GA, Zhang et al., CVPR 2023)::

    α_i ← α_i + d_t · (G_i − μ) / max_j |G_j − μ|,   μ = mean_j G_j,   d_t = (1 − t'/T) · d, t' = 0 … T−1

then clip each α_i to [0, 1] and renormalise to sum 1. Orientation of the gap: this rule *raises* the
weight of a client with a *larger* G_i, which is what Sec. 3.2 intends ("a larger generalization gap
indicates ... the global model generalizes less effectively on client i"). The client must therefore report
a gap that grows when the global model does worse on its data (FedDG-GA uses loss(global) − loss(local); for
accuracy it flips the sign). The strategy consumes the reported value as is.

This module depends on Flower and numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from logging import INFO, WARNING
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.common.logger import log
from flwr.serverapp import Grid
from flwr.serverapp.strategy import FedAvg

from fedprint.server.reply_checks import check_reply

#: Gaps whose spread ``max_j |G_j − μ|`` is at most this are treated as equal. Gaps live in [−1, 1]; the mean of
#: equal floats can differ from them by ~1e-17, and dividing by that spread would blow the update up.
GAP_SPREAD_TOL = 1e-12

#: Tolerance on Σ α = 1 for the weights passed to `update_weights`.
ALPHA_SUM_TOL = 1e-6

STATE_FORMAT = "affr-state/2"


def step_size(t: int, T: int, d: float) -> float:
    """Linearly decaying step d_t = (1 − t/T) · d of the weight update (Sec. 3.2, below Eq. 7).

    Convention: ``t`` is the current round, 1-based (Flower's ``server_round``), ``T`` the total number of
    rounds; Alg. 1 loops its index t' = t − 1 over 0..T−1, so round t uses d_t = (1 − (t − 1)/T)·d: d in round 1
    and d/T in the last round, which therefore still moves the weights. Round 1 has gaps of 0 anyway (no previous
    local model), so the first update that moves the weights is round 2 with (1 − 1/T)·d.

    Parameters
    ----------
    t : int
        Current round, 1 <= t <= T.
    T : int
        Total number of rounds, >= 1.
    d : float
        Base step size, finite and >= 0 (paper default 0.8, Table 7).

    Returns
    -------
    float
        The step d_t >= 0.

    Raises
    ------
    ValueError
        If ``T`` < 1, ``t`` is outside [1, T], or ``d`` is negative or not finite.

    Examples
    --------
    >>> step_size(1, 10, 0.8), round(step_size(10, 10, 0.8), 6)
    (0.8, 0.08)
    """
    if not isinstance(T, int | np.integer) or T < 1:
        raise ValueError(f"T (total rounds) must be an integer >= 1, got {T!r}")
    if not isinstance(t, int | np.integer) or not 1 <= t <= T:
        raise ValueError(f"t (current round, 1-based) must be an integer in [1, {T}], got {t!r}")
    if not math.isfinite(d) or d < 0:
        raise ValueError(f"d (step size) must be finite and >= 0, got {d!r}")
    return (1.0 - (t - 1) / T) * d


def update_weights(alpha: Mapping[Any, float], gaps: Mapping[Any, float], step: float) -> dict[Any, float]:
    """One generalization-adjustment step of the aggregation weights (Eq. 7 [1]_ as in FedDG-GA [2]_).

    ``α_i ← clip(α_i + step · (G_i − μ) / max_j |G_j − μ|, 0, 1)``, then renormalised to Σ α = 1, where μ is
    the mean gap over the nodes given. Gaps are first clipped to [−1, 1] so a single client cannot claim an absurd
    gap (an accuracy difference cannot leave that range). NOTE: the paper's printed Eq. 7 also divides the
    previous weight by the max gap, a typesetting error; this is the FedDG-GA rule the paper cites.

    When all gaps are equal (``max_j |G_j − μ| <=`` `GAP_SPREAD_TOL`) or ``step == 0`` the weights are returned
    unchanged (no division by zero, no NaN).

    Parameters
    ----------
    alpha : mapping client -> float
        Current weights of the participating nodes, each in [0, 1], summing to 1 (± `ALPHA_SUM_TOL`).
    gaps : mapping client -> float
        Generalization gap of each node (same keys as ``alpha``), finite.
    step : float
        Step d_t, finite and >= 0 (see `step_size`).

    Returns
    -------
    dict
        New weights, same keys, each in [0, 1], summing to 1.

    Raises
    ------
    ValueError
        If ``alpha`` is empty, the two mappings have different keys, a weight is outside [0, 1] or the weights do
        not sum to 1, a gap is not finite, or ``step`` is negative or not finite.

    See Also
    --------
    step_size : the decaying step d_t of round t.
    AFFR : the Flower strategy that applies this rule every round.

    References
    ----------
    .. [1] Y. Yan, X. Xie, H. Ren, Y. Cao, H. Chang, "Privacy-Preserving Fingerprint Recognition via Federated
       Adaptive Domain Generalization", Computers, Materials & Continua, 2025 (AFFR, Alg. 1, Eqs. 5–7).
    .. [2] R. Zhang, Q. Xu, J. Yao, Y. Zhang, Q. Tian, Y. Wang, "Federated Domain Generalization with
       Generalization Adjustment", CVPR 2023 (the weight update Eq. 7 cites).

    Examples
    --------
    Three clients at uniform weights; the one with the largest gap (the global model generalises worst on its
    data) gains weight:

    >>> w = update_weights({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3}, {"a": 0.2, "b": 0.0, "c": -0.1}, step=0.4)
    >>> {k: round(v, 4) for k, v in w.items()}
    {'a': 0.7333, 'b': 0.2533, 'c': 0.0133}
    >>> round(sum(w.values()), 12)
    1.0

    Equal gaps (or a zero step) leave the weights as they are:

    >>> update_weights({"a": 0.25, "b": 0.75}, {"a": 0.1, "b": 0.1}, step=0.4)
    {'a': 0.25, 'b': 0.75}
    """
    if not alpha:
        raise ValueError("alpha must contain at least one node")
    if set(alpha) != set(gaps):
        raise ValueError(
            f"alpha and gaps must have the same node ids, got {sorted(alpha)} and {sorted(gaps)}"
        )
    if not math.isfinite(step) or step < 0:
        raise ValueError(f"step must be finite and >= 0, got {step!r}")
    nodes = sorted(alpha)
    a = np.array([alpha[n] for n in nodes], dtype=np.float64)
    g = np.array([gaps[n] for n in nodes], dtype=np.float64)
    if not np.all(np.isfinite(a)) or np.any(a < 0) or np.any(a > 1):
        raise ValueError(f"alpha values must be finite and in [0, 1], got {dict(alpha)}")
    if abs(a.sum() - 1.0) > ALPHA_SUM_TOL:
        raise ValueError(f"alpha must sum to 1 (±{ALPHA_SUM_TOL}), got sum {a.sum()!r}")
    if not np.all(np.isfinite(g)):
        raise ValueError(f"gaps must be finite, got {dict(gaps)}")

    centred = np.clip(g, -1.0, 1.0)
    centred = centred - centred.mean()
    spread = float(np.max(np.abs(centred)))
    if spread <= GAP_SPREAD_TOL or step == 0:
        return {n: float(alpha[n]) for n in nodes}
    # Σ (G_i − μ) = 0, so before clipping the weights still sum to 1; clipping at 0 only adds mass and at 1
    # only happens when some weight exceeds 1: the sum stays > 0 and the renormalisation is safe.
    new = np.clip(a + step * centred / spread, 0.0, 1.0)
    new /= new.sum()
    return {n: float(w) for n, w in zip(nodes, new, strict=True)}


def _weighted_average(arrays: list[np.ndarray], weights: list[float], dtype: np.dtype) -> np.ndarray:
    """Σ w_i · arrays_i accumulated in float64 (complex128), cast back to ``dtype`` (integers rounded)."""
    acc_dtype = np.complex128 if np.issubdtype(dtype, np.complexfloating) else np.float64
    acc = np.zeros(arrays[0].shape, dtype=acc_dtype)
    for arr, w in zip(arrays, weights, strict=True):
        acc += w * arr.astype(acc_dtype, copy=False)
    if np.issubdtype(dtype, np.integer) or dtype == np.bool_:
        acc = np.rint(acc)
    return np.asarray(acc.astype(dtype))  # np.rint turns 0-d arrays into scalars; Array needs an ndarray


def _common_metrics(contents: list[RecordDict]) -> tuple[list[RecordDict], list[str]]:
    """Restrict every reply's MetricRecord to the keys all replies share with the same type/length.

    Flower's ``aggregate_metricrecords`` silently produces a partial sum for a key only some replies carry and
    raises for lists of different lengths; both are avoided here. Returns the restricted contents and the
    dropped keys.
    """
    records = [next(iter(c.metric_records.values())) for c in contents]

    def signature(value: Any) -> tuple[str, int]:
        return ("list", len(value)) if isinstance(value, list) else ("scalar", 0)

    first = records[0]
    common = [k for k in first if all(k in r and signature(r[k]) == signature(first[k]) for r in records)]
    dropped = sorted({k for r in records for k in r} - set(common))
    restricted = [RecordDict({"metrics": MetricRecord({k: r[k] for k in common})}) for r in records]
    return restricted, dropped


def client_identity(node: int, content: RecordDict | None, record: str = "client", field: str = "name") -> str:
    """The stable identity a reply speaks for: ``content[record][field]`` (the ClientApp's client name), else
    ``"node-<id>"``.

    Flower node ids are new on every ``run_simulation`` and every SuperNode restart, so weights keyed by them
    would not survive a resume; the client name comes from the partition id (simulation) or the node config
    (deployment) and stays the same.
    """
    if content is not None:
        rec = content.config_records.get(record)
        if isinstance(rec, ConfigRecord) and isinstance(rec.get(field), str) and rec[field]:
            return str(rec[field])
    return f"node-{node}"


#: History fields that are dicts keyed by client identity.
_KEYED = ("alpha", "round_weights", "gaps", "reported_gaps", "rejected")


class AFFR(FedAvg):
    """AFFR strategy: FedAvg whose aggregation weights follow the clients' generalization gaps (Alg. 1).

    Semantics (all weights are keyed by the client's stable identity, `client_identity`: the name in the
    reply's ``client`` ConfigRecord, else ``node-<node id>``. Node ids change on every restart, names do not,
    so the learned weights survive a resume. Replies are processed in ascending identity, so the aggregate is
    bitwise independent of reply order; two nodes claiming one identity in a round are both rejected):

    * Initialisation: the nodes with a valid reply in the first aggregated round get α_i^0 = 1/C. A node whose
      first valid reply comes later enters with the mean of the stored weights (= 1/K for K known nodes), then
      all stored weights are renormalised to sum 1.
    * First participation: a node has no previous local model θ_i^{t−1} then, so Eq. 5 is undefined; its
      gap is taken as 0 whatever it reports (logged). In round 1 every gap is 0: the weights stay 1/C.
    * Update: the stored weights of the nodes present this round (holding mass m of the total 1) are
      renormalised to sum 1, updated with `update_weights` using d_t = ``step_size(t, num_rounds, step)``,
      and the result is this round's aggregation weights. They are stored back scaled by m, so absent
      nodes keep their stored α unchanged for when they return and the stored weights keep summing to 1.
      (If m = 0 the present nodes start this round from uniform weights and their stored α stays 0.)
    * Failures: an error reply, a reply rejected by `server.reply_checks.check_reply` (missing, extra or
      mis-shaped arrays vs the global model sent in `configure_train`, NaN/Inf arrays, missing or
      non-finite gap, missing or non-positive ``weighted_by_key``) or several replies from one node are
      skipped with a WARNING naming the node and the reason; they never stop the run. The gap is clipped
      to [−1, 1] (WARNING).
    * Aggregation: θ_g^{t+1} = Σ_i α_i θ_i over the accepted replies, per key of the global ArrayRecord (in
      its key order), accumulated in float64 and cast back to each array's dtype (integers rounded).
      Metrics are aggregated like FedAvg (``train_metrics_aggr_fn``, weighted by ``weighted_by_key``) over
      the accepted replies and the metric keys they all share.
    * Resume: `state_dict` / `load_state_dict` (JSON-serialisable). Flower's ``Strategy.start`` numbers rounds
      from 1, so after loading, ``server_round`` k means round ``round_offset + k`` of the schedule; run
      `rounds_remaining` more rounds.

    Parameters
    ----------
    num_rounds : int
        Total number of rounds T of the run (for the step schedule), >= 1.
    step : float, default 0.8
        Base step size d (Table 7 best), finite and >= 0. 0 reduces AFFR to uniform-weight averaging.
    gap_key : str, default "gap"
        Key of the generalization gap in each train reply's MetricRecord.
    noise_floor : float, default 0
        Variant (not in the paper): when max|G − μ| < noise_floor × the largest reported gap standard error
        (``se_key``), the round leaves the weights unchanged. 0 = the paper's rule. Every round records
        ``max_centred_gap``, ``gap_se`` and ``within_noise`` (max|G − μ| < 2 SE) either way.
    se_key : str, default "gap-se"
        Key of the gap's standard error in the replies (optional: missing = 0).
    **fedavg_kwargs
        Forwarded to ``flwr.serverapp.strategy.FedAvg`` (fraction_train, min_train_nodes, weighted_by_key,
        arrayrecord_key, train_metrics_aggr_fn, ...). ``weighted_by_key`` (default "num-examples") weights
        only the metric average, not the model.

    Attributes
    ----------
    alpha : dict[str, float]
        Stored weight of every client identity seen so far (sums to 1).
    history : list[dict]
        One entry per aggregated round: ``round``, ``step``, ``participating`` (accepted identities),
        ``rejected`` ({node: reason}), ``reported_gaps``, ``gaps`` (values used), ``round_weights``
        (weights of this round's average) and ``alpha`` (stored weights after the round).
    """

    def __init__(
        self, num_rounds: int, step: float = 0.8, gap_key: str = "gap", noise_floor: float = 0.0,
        se_key: str = "gap-se", **fedavg_kwargs: Any
    ) -> None:
        super().__init__(**fedavg_kwargs)
        if not (isinstance(noise_floor, int | float) and math.isfinite(noise_floor) and noise_floor >= 0):
            raise ValueError(f"noise_floor must be finite and >= 0, got {noise_floor!r}")
        self.noise_floor = float(noise_floor)
        self.se_key = se_key
        if not isinstance(num_rounds, int) or num_rounds < 1:
            raise ValueError(f"num_rounds must be an integer >= 1, got {num_rounds!r}")
        if not isinstance(step, int | float) or not math.isfinite(step) or step < 0:
            raise ValueError(f"step must be finite and >= 0, got {step!r}")
        if not isinstance(gap_key, str) or not gap_key:
            raise ValueError(f"gap_key must be a non-empty string, got {gap_key!r}")
        if gap_key == self.weighted_by_key:
            raise ValueError(f"gap_key must differ from weighted_by_key ({self.weighted_by_key!r})")
        self.num_rounds = num_rounds
        self.step = float(step)
        self.gap_key = gap_key
        self.alpha: dict[str, float] = {}
        self.history: list[dict[str, Any]] = []
        self.round_offset = 0
        self._reference: ArrayRecord | None = None
        #: Flower node id -> the client name it gave in a reply of this process (node ids change on restart).
        self.node_names: dict[int, str] = {}

    # ------------------------------------------------------------------ rounds
    def _round(self, server_round: int) -> int:
        return server_round + self.round_offset

    @property
    def rounds_done(self) -> int:
        """Rounds of the schedule already aggregated (last ``round`` in the history, or ``round_offset``)."""
        return self.history[-1]["round"] if self.history else self.round_offset

    @property
    def rounds_remaining(self) -> int:
        """Rounds still to run to reach ``num_rounds``."""
        return self.num_rounds - self.rounds_done

    def summary(self) -> None:
        """Log the FedAvg configuration plus the AFFR parameters."""
        super().summary()
        log(INFO, "\t└──> AFFR: rounds T=%d, step d=%.3f, gap key '%s', round offset %d",
            self.num_rounds, self.step, self.gap_key, self.round_offset)

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """FedAvg's configure_train; remembers ``arrays`` to validate the replies against it.

        ``config["server-round"]`` carries the round of the schedule (``round_offset`` included).
        """
        self._reference = arrays
        return super().configure_train(self._round(server_round), arrays, config, grid)

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """FedAvg's configure_evaluate with the schedule's round number in ``config["server-round"]``."""
        return super().configure_evaluate(self._round(server_round), arrays, config, grid)

    # ------------------------------------------------------------- validation
    def _screen(
        self, replies: Iterable[Message], expect_arrays: bool, required: list[str], stage: str
    ) -> tuple[dict[str, RecordDict], dict[str, str]]:
        """Split replies into accepted contents and rejection reasons, both keyed by client identity."""
        by_node: dict[int, list[Message]] = {}
        for msg in replies:
            by_node.setdefault(int(msg.metadata.src_node_id), []).append(msg)
        candidates: dict[int, tuple[str, RecordDict, dict]] = {}
        rejected: dict[str, str] = {}

        self._rejected_nodes: dict[int, str] = {}

        def reject(node: int, who: str, reason: str) -> None:
            rejected[who] = reason
            self._rejected_nodes[node] = reason
            log(WARNING, "%s: rejected reply from node %d: %s [%s]", stage, node, reason, who)

        for node in sorted(by_node):
            msgs = by_node[node]
            content = msgs[0].content if len(msgs) == 1 and msgs[0].has_content() else None
            who = client_identity(node, content)
            if content is not None and who != f"node-{node}":
                self.node_names[node] = who  # the name a node gives is public (its node config), kept per process
            if len(msgs) > 1:
                reason: str | None = f"{len(msgs)} replies from the same node in one round"
            elif msgs[0].has_error():
                reason = f"error reply (code {msgs[0].error.code}): {msgs[0].error.reason}"
            elif content is None:
                reason = "reply carries neither content nor error"
            else:
                arrays: dict = {}
                reason = check_reply(
                    content,
                    self._reference if expect_arrays else None,
                    required_metric_keys=required,
                    positive_metric_keys=[self.weighted_by_key],
                    expect_arrays=expect_arrays,
                    decoded=arrays,
                )
            if reason is None:
                candidates[node] = (who, content, arrays)
            else:
                reject(node, who, reason)
        claimed: dict[str, list[int]] = {}
        for node, (who, _, _) in candidates.items():
            claimed.setdefault(who, []).append(node)
        accepted: dict[str, RecordDict] = {}
        self._decoded: dict[str, dict] = {}
        self._node_of: dict[str, int] = {}
        for node, (who, content, arrays) in sorted(candidates.items(), key=lambda kv: kv[1][0]):
            if len(claimed[who]) > 1:
                reject(node, who, f"identity {who!r} claimed by nodes {claimed[who]} in one round")
                continue
            accepted[who] = content
            self._node_of[who] = node
            self._decoded[who] = arrays  # decoded once here, reused by the aggregation
        log(INFO, "%s: %d accepted, %d rejected", stage, len(accepted), len(rejected))
        return accepted, rejected

    def _aggregate_metrics(self, contents: list[RecordDict], fn: Any, stage: str) -> MetricRecord:
        restricted, dropped = _common_metrics(contents)
        if dropped:
            log(WARNING, "%s: metric keys not shared by all accepted replies are not aggregated: %s",
                stage, dropped)
        return fn(restricted, self.weighted_by_key)

    # ------------------------------------------------------------ aggregation
    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Update the weights from the gaps and aggregate θ_g^{t+1} = Σ α_i θ_i (Alg. 1, server side)."""
        if self._reference is None:
            raise RuntimeError(
                "aggregate_train called before configure_train: no global model to check replies against"
            )
        t = self._round(server_round)
        d_t = step_size(t, self.num_rounds, self.step)
        accepted, rejected = self._screen(replies, True, [self.gap_key], "aggregate_train")
        entry: dict[str, Any] = {
            "round": t, "step": d_t, "participating": sorted(accepted), "rejected": rejected
        }

        reported = {n: float(next(iter(c.metric_records.values()))[self.gap_key]) for n, c in accepted.items()}
        gaps = {n: self._gap_used(n, raw, n not in self.alpha) for n, raw in reported.items()}
        entry["reported_gaps"], entry["gaps"] = reported, gaps

        if not accepted:
            log(WARNING, "aggregate_train: round %d has no usable reply; the global model is kept", t)
            entry["round_weights"], entry["alpha"] = {}, dict(self.alpha)
            self.history.append(entry)
            return None, None

        present = sorted(accepted)
        newcomers = [n for n in present if n not in self.alpha]
        se = {n: self._gap_se(accepted[n]) for n in present}
        round_weights = self._round_weights(t, d_t, present, newcomers, gaps, se, entry)

        arrays = self._aggregate_arrays([self._decoded[n] for n in present], [round_weights[n] for n in present])
        metrics = self._aggregate_metrics([accepted[n] for n in present], self.train_metrics_aggr_fn,
                                          "aggregate_train")
        return arrays, metrics

    def _round_weights(self, t: int, d_t: float, present: list[str], newcomers: list[str], gaps: dict[str, float],
                       se: dict[str, float], entry: dict[str, Any]) -> dict[str, float]:
        """This round's aggregation weights over ``present`` (class docstring, *Update*); stores α back and
        appends ``entry`` (completed with the gaps used and the weights) to the history."""
        self._admit(present)
        mass = math.fsum(self.alpha[n] for n in present)
        if mass > 0:
            start = {n: self.alpha[n] / mass for n in present}
        else:
            log(WARNING, "aggregate_train: present nodes %s hold no stored weight; starting from uniform",
                present)
            start = {n: 1.0 / len(present) for n in present}
        # Newcomers' gaps are 0 by definition (no previous local model), not measured: they stay out of the
        # centring μ and keep their entry weight this round; the update moves the others within their share.
        veterans = [n for n in present if n not in newcomers]
        share = math.fsum(start[n] for n in veterans)
        round_weights = dict(start)
        if veterans and share > 0:
            used = self._gaps_for_update({n: gaps[n] for n in veterans})
            entry["gaps"].update(used)
            mu = math.fsum(used.values()) / len(used)
            spread = max(abs(g - mu) for g in used.values())
            gap_se = max(se[n] for n in veterans)
            entry.update(max_centred_gap=spread, gap_se=gap_se,
                         within_noise=bool(gap_se > 0 and spread < 2 * gap_se))
            if self.noise_floor > 0 and spread < self.noise_floor * gap_se:
                log(INFO, "aggregate_train: gap spread %.4g < %.3g x SE %.4g: weights unchanged (noise floor)",
                    spread, self.noise_floor, gap_se)
            else:
                moved = update_weights({n: start[n] / share for n in veterans}, used, d_t)
                round_weights.update({n: moved[n] * share for n in veterans})
        round_weights = self._constrain(round_weights)
        if mass > 0:
            for n in present:
                self.alpha[n] = round_weights[n] * mass
        else:  # the nodes that held all the weight are gone: the present ones take over from uniform
            for n in present:
                self.alpha[n] = round_weights[n]
            total = math.fsum(self.alpha.values())
            self.alpha = {n: a / total for n, a in self.alpha.items()}
        entry["round_weights"], entry["alpha"] = round_weights, dict(self.alpha)
        self.history.append(entry)
        log(INFO, "aggregate_train: round %d, step %.4f, weights %s", t, d_t,
            {n: round(w, 4) for n, w in round_weights.items()})
        return round_weights

    def _gap_used(self, who: str, raw: float, newcomer: bool) -> float:
        """The gap a reply's value ``raw`` stands for: 0 for a first participation (Eq. 5 undefined), else
        clipped to [−1, 1] (logged)."""
        if newcomer:
            if raw != 0.0:
                log(INFO, "aggregate_train: %s participates for the first time; its gap %.4g is taken as 0 (no "
                    "previous local model, Eq. 5)", who, raw)
            return 0.0
        used = min(1.0, max(-1.0, raw))
        if used != raw:
            log(WARNING, "aggregate_train: gap %.4g of %s clipped to %.0f", raw, who, used)
        return used

    def _gap_se(self, content: RecordDict) -> float:
        """The gap's standard error a reply reports (0 when absent or not a finite number >= 0)."""
        rec = next(iter(content.metric_records.values()))
        v = rec.get(self.se_key, 0.0)
        return float(v) if isinstance(v, int | float) and math.isfinite(v) and v >= 0 else 0.0

    def _gaps_for_update(self, gaps: dict[str, float]) -> dict[str, float]:
        """The gaps the weight update uses (hook: the client-DP variant releases noisy gaps)."""
        return gaps

    def _constrain(self, weights: dict[str, float]) -> dict[str, float]:
        """This round's aggregation weights after any constraint (hook: the client-DP variant caps them)."""
        return weights

    def _admit(self, present: list[str]) -> None:
        """Give first-seen nodes their initial weight (1/C at start, mean weight later); renormalise."""
        new = [n for n in present if n not in self.alpha]
        if not new:
            return
        if not self.alpha:
            self.alpha = {n: 1.0 / len(new) for n in new}
            return
        mean = math.fsum(self.alpha.values()) / len(self.alpha)
        for n in new:
            self.alpha[n] = mean
        total = math.fsum(self.alpha.values())
        self.alpha = {n: a / total for n, a in self.alpha.items()}
        log(INFO, "aggregate_train: new node(s) %s enter with weight %.4g (before renormalisation)",
            new, mean)

    def _aggregate_arrays(self, decoded: list[dict], weights: list[float]) -> ArrayRecord:
        """Σ w_i θ_i per key of the global model, from the arrays ``_screen`` already decoded."""
        assert self._reference is not None
        out: dict[str, Array] = {}
        for key, ref in self._reference.items():
            out[key] = Array(_weighted_average([d[key] for d in decoded], weights, np.dtype(ref.dtype)))
        return ArrayRecord(out)

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        """FedAvg's metric average; invalid replies are skipped with a logged reason instead of raising."""
        accepted, _ = self._screen(replies, False, [], "aggregate_evaluate")
        if not accepted:
            return None
        return self._aggregate_metrics([accepted[n] for n in sorted(accepted)], self.evaluate_metrics_aggr_fn,
                                       "aggregate_evaluate")

    # ------------------------------------------------------------- checkpoint
    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable state: configuration, stored weights, history and rounds done."""
        history = [{**e, **{f: dict(e[f]) for f in _KEYED}} for e in self.history]
        return {
            "format": STATE_FORMAT,
            "num_rounds": self.num_rounds,
            "step": self.step,
            "gap_key": self.gap_key,
            "rounds_done": self.rounds_done,
            "alpha": dict(self.alpha),
            "history": history,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a `state_dict` (e.g. after ``json.load``) to resume a killed run.

        The configuration (num_rounds, step, gap_key) must match this instance. Sets ``round_offset`` to the
        rounds already done, because Flower's ``Strategy.start`` numbers the resumed rounds from 1 again.
        """
        if state.get("format") == "affr-state/1":
            raise ValueError("state: format 'affr-state/1' keys the weights by Flower node id, which changes on "
                             "every restart, so it cannot be resumed; start a new run")
        if state.get("format") != STATE_FORMAT:
            raise ValueError(f"state: expected format {STATE_FORMAT!r}, got {state.get('format')!r}")
        for name in ("num_rounds", "step", "gap_key"):
            if state[name] != getattr(self, name):
                raise ValueError(f"state: {name} = {state[name]!r} does not match this strategy's "
                                 f"{getattr(self, name)!r}")
        if state.get("dp") is not None:
            raise ValueError("state: the checkpoint is of a client-level DP run ([dp] level = \"client\"); resume it "
                             "with the same [dp] settings, or start a new run directory")
        history = [{**e, **{f: dict(e[f]) for f in _KEYED}, "participating": [str(n) for n in e["participating"]]}
                   for e in state["history"]]
        self.alpha = {str(n): float(a) for n, a in state["alpha"].items()}
        self.history = history
        self.round_offset = int(state["rounds_done"])
