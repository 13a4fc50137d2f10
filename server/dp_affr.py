"""AFFR (and FedAvg) with client-level differential privacy that holds for the weights actually used.

:class:`DPAFFR` is :class:`fedprint.server.affr.AFFR` with the mechanism of :mod:`fedprint.privacy.client_dp`:

* **Cohort fixed before replies.** ``configure_train`` fixes the round's cohort — the nodes the round is sent to,
  chosen by Flower's sampler from the connected nodes, never from data — and with it m, the cap c/m, each member's
  label (the name its node gave in an earlier reply of this process, else ``node-<id>``) and which members are
  newcomers. A member whose reply is rejected (error, time-out, NaN/Inf, ``num-examples <= 0``, missing gap,
  duplicate identity) still counts: gap 0 and a zero update Δ = 0 at the weight the rule gives it. So the cohort,
  m and the cap are the same for D and D' = D with one client's data replaced by anything (even data that makes
  its ClientApp fail), and the weights are the same function of the previous weights and the noisy gaps. A
  ``node-<id>`` label takes its node's name once the node gives it (a public label; no value changes). After a
  restart (new node ids) the first round's members are not named yet, so that round starts from uniform weights
  (newcomers), whatever replies come — the weights learned before the restart are not reused.
* **Weights and noise.** Noisy gaps drive the weight update, the weights are capped at c/m, each member's update
  θ_i − θ_g is clipped to C, and the release θ_g + Σ α_i Δ̃_i gets N(0, (z·2C·max α)²) noise, max over the
  cohort. With ``step = 0`` the weights stay uniform (1/m over the cohort), no gap is released, and it is
  DP-FedAvg (σ = z·2C/m, Flower's own ``compute_stdv`` ×2 because the relation here is replace-one).
* **Every release is counted, with its own parameters.** Each aggregation appends a release record (round, z,
  z_g, C, c, δ, m, the cohort's weights, σ) to :attr:`DPAFFR.releases` and hands it to :attr:`DPAFFR.on_release`
  *before* the model is returned to Flower (which sends it to the clients for evaluation before the round's
  checkpoint exists). The ServerApp writes it to the run directory at once (:func:`server.checkpoint.
  append_release`), so a round re-run after a crash in that window counts twice. :meth:`DPAFFR.accounting`
  composes the recorded releases (:func:`fedprint.privacy.client_dp.composed_epsilon`); a resume with different ``[dp]``
  settings is refused, naming the difference (:meth:`DPAFFR.load_state_dict`).
* **A resume needs the whole log.** The checkpoint's state records how many releases were logged when it was
  written (``releases_logged``) and its rounds done; a resume is refused, naming the gap, unless the log restored
  (:meth:`DPAFFR.restore_releases`) holds at least that many releases and one for every round 1..rounds done
  (a deleted or truncated ``dp_releases.json`` would under-report ε: 1 release and ε 7.08 reported for 2 rounds
  whose ε is 10.73, issue 59 §4). What this cannot see: a release made after the last checkpoint (a round killed
  between its release and its checkpoint) whose log entry is then deleted — the log alone records it.

The proof and what is not protected are in :mod:`fedprint.privacy.client_dp`. Noise comes from OS entropy (``secrets``)
and is never stored; tests inject a generator through ``rng``.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable, Iterable, Mapping
from logging import WARNING
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.common.logger import log
from flwr.serverapp import Grid

from fedprint.privacy.client_dp import cap_weights, composed_epsilon, dp_weighted_sum, noisy_gaps
from fedprint.privacy.delta import delta_rule
from fedprint.server.affr import AFFR, step_size

#: Reason recorded for a cohort member that sent no reply before the round's time-out.
NO_REPLY = "no reply (time-out, lost node or crash)"

#: The ``[dp]`` settings a resumed run must keep (name in the state -> attribute).
DP_SETTINGS = ("noise_multiplier", "gap_noise_multiplier", "clip", "alpha_cap", "delta")

#: Federated methods client-level DP is implemented for: DP-FedAvg (step 0) and DP-AFFR.
CLIENT_DP_METHODS = ("fedavg", "affr")

#: Why each other method is refused under ``[dp] level = "client"`` (built as DPAFFR it would be DP-FedAvg).
_NOT_CLIENT_DP = {
    "fedprox": "its proximal local objective is not part of the DP mechanism",
    "fedala": "its adaptive local aggregation keeps a personalised model per client",
    "feddbe": "its domain bias eliminator keeps personalised client-side state",
    "fedas": "its parameter alignment and client synchronisation personalise each client's model",
}


def refuse_client_dp_method(method: str) -> None:
    """Raise ValueError (one line naming the method and why) unless client-level DP is implemented for ``method``.

    Only DP-FedAvg and DP-AFFR are implemented (:class:`DPAFFR`); any other method would run as DP-FedAvg under its
    own name, so a report would credit it with results and a guarantee that are DP-FedAvg's (issue 59 §6).
    """
    if method in CLIENT_DP_METHODS:
        return
    why = _NOT_CLIENT_DP.get(method, "it has no client-level DP implementation")
    raise ValueError(f"[dp] level = \"client\": client-level DP is implemented for fedavg and affr only, not {method} "
                     f"({why}; it would run as DP-FedAvg under the name {method}); leave {method} out of the "
                     "methods or set [dp] enabled = false")


def sampling_statement(fraction_train: float, cohort_sizes: Iterable[int] = ()) -> str:
    """What a client-DP run says about client sampling (true for ``fraction_train`` = 1 and < 1)."""
    sizes = sorted(set(cohort_sizes))
    shown = "" if not sizes else f" (cohort sizes {', '.join(map(str, sizes))})"
    if fraction_train >= 1:
        return (f"none: every connected client is asked in every round{shown}; a member whose reply fails or is "
                "rejected counts with a zero update at its planned weight; no privacy amplification by sampling "
                "is claimed")
    return (f"fraction_train = {fraction_train:g}: each round asks a {fraction_train:.0%} sample of the connected "
            f"clients (Flower's sampler, public){shown}; no privacy amplification by sampling is claimed — every "
            "client is charged every round as if it had been asked, which can only overstate ε")


class DPAFFR(AFFR):
    """AFFR / FedAvg with client-level (ε, δ)-DP (see module docstring).

    Parameters
    ----------
    num_rounds, step, gap_key, **fedavg_kwargs
        As :class:`fedprint.server.affr.AFFR` (``step = 0``: DP-FedAvg with uniform weights).
    noise_multiplier : float
        z of the model release (> 0).
    gap_noise_multiplier : float or None
        z_g of the gap release; None only with ``step = 0`` (no gaps used).
    clip : float
        C, L2 bound of each client's update (> 0).
    alpha_cap : float
        c: no client weighs more than c/m (m = the round's cohort size), c >= 1. Default 2.
    delta : float
        δ of the reported (ε, δ) (default 1e-5; ``server.server_app`` passes at most 1/(10·clients)).
    rng : numpy.random.Generator, optional
        Tests only; default: seeded from OS entropy, never stored.

    Attributes
    ----------
    releases : list[dict]
        One record per model release (round, z, z_g, C, c, δ, m, cohort weights, σ), in release order.
    on_release : callable or None
        Called with each release record before the released model is returned to Flower.
    """

    def __init__(self, num_rounds: int, step: float = 0.8, *, noise_multiplier: float,
                 gap_noise_multiplier: float | None, clip: float, alpha_cap: float = 2.0, delta: float = 1e-5,
                 rng: np.random.Generator | None = None, **kwargs: Any) -> None:
        super().__init__(num_rounds, step, **kwargs)
        if not (math.isfinite(noise_multiplier) and noise_multiplier > 0):
            raise ValueError(f"noise_multiplier: expected a finite number > 0, got {noise_multiplier!r}")
        if step > 0 and not (gap_noise_multiplier and math.isfinite(gap_noise_multiplier) and gap_noise_multiplier > 0):
            raise ValueError("gap_noise_multiplier: AFFR (step > 0) releases gaps, so they need noise > 0")
        if not (math.isfinite(clip) and clip > 0):
            raise ValueError(f"clip: expected a finite number > 0, got {clip!r}")
        if not alpha_cap >= 1:
            raise ValueError(f"alpha_cap: expected >= 1 (weights may reach alpha_cap/m), got {alpha_cap!r}")
        if not 0 < delta < 1:
            raise ValueError(f"delta: expected a number in (0, 1), got {delta!r}")
        self.noise_multiplier = float(noise_multiplier)
        self.gap_noise_multiplier = None if step == 0 else float(gap_noise_multiplier)
        self.clip, self.alpha_cap, self.delta = float(clip), float(alpha_cap), float(delta)
        self._rng = rng if rng is not None else np.random.default_rng(secrets.randbits(128))
        self.sigmas: list[float] = []
        self.releases: list[dict[str, Any]] = []
        self.on_release: Callable[[dict[str, Any]], None] | None = None
        self._plan: dict[int, str] | None = None
        self._restored = False  # restore_releases was called (even with an empty log)
        self._expected_log: tuple[int, int] | None = None  # (rounds done, releases logged) of a loaded checkpoint

    # ------------------------------------------------------------------ cohort
    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        """AFFR's configure_train, then the cohort plan: node -> label, fixed before any reply arrives."""
        if self._expected_log is not None and not self._restored:
            raise RuntimeError("a resumed client-level DP run must restore its release log (restore_releases) "
                               "before its first round: without it ε would count only the new releases")
        msgs = list(super().configure_train(server_round, arrays, config, grid))
        plan: dict[int, str] = {}
        for node in sorted(int(m.metadata.dst_node_id) for m in msgs):
            name = self.node_names.get(node)
            plan[node] = name if name and name not in plan.values() else f"node-{node}"
        self._plan = plan
        return msgs

    def aggregate_train(self, server_round: int, replies: Iterable[Message]
                        ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """One DP round over the planned cohort (module docstring); rejected or silent members count as zero."""
        if self._reference is None or self._plan is None:
            raise RuntimeError("aggregate_train called before configure_train: no cohort and no global model")
        plan, self._plan = self._plan, None
        t = self._round(server_round)
        d_t = step_size(t, self.num_rounds, self.step)
        accepted, _ = self._screen(replies, True, [self.gap_key], "aggregate_train")
        by_node = {self._node_of[who]: who for who in accepted}
        cohort = [plan[n] for n in sorted(plan)]
        newcomers = [label for label in cohort if label not in self.alpha]
        ok: dict[str, str] = {}  # cohort label -> identity of its accepted reply
        rejected: dict[str, str] = {}
        for node, label in plan.items():
            if node in by_node:
                ok[label] = by_node[node]
            else:
                rejected[label] = self._rejected_nodes.get(node, NO_REPLY)
        for node, who in by_node.items():
            if node not in plan:
                log(WARNING, "aggregate_train: reply from node %d (%s) outside this round's cohort ignored", node, who)
        if rejected:
            log(WARNING, "aggregate_train: %d cohort member(s) count with a zero update at their planned weight: %s",
                len(rejected), rejected)
        reported = {label: float(next(iter(accepted[who].metric_records.values()))[self.gap_key])
                    for label, who in ok.items()}
        gaps = {label: self._gap_used(label, reported[label], label in newcomers) if label in ok else 0.0
                for label in cohort}
        se = {label: self._gap_se(accepted[ok[label]]) if label in ok else 0.0 for label in cohort}
        entry: dict[str, Any] = {"round": t, "step": d_t, "cohort": cohort, "participating": sorted(ok),
                                 "rejected": rejected, "reported_gaps": reported, "gaps": gaps}
        weights = self._round_weights(t, d_t, cohort, newcomers, gaps, se, entry)

        zero = {k: v.numpy() for k, v in self._reference.items()}  # a rejected member's update Δ = 0
        arrays = self._aggregate_arrays([self._decoded[ok[label]] if label in ok else zero for label in cohort],
                                        [weights[label] for label in cohort])
        release = {"round": t, "noise_multiplier": self.noise_multiplier,
                   "gap_noise_multiplier": self.gap_noise_multiplier, "clip": self.clip, "alpha_cap": self.alpha_cap,
                   "delta": self.delta, "cohort_size": len(cohort), "weights": dict(weights),
                   "sigma": self.sigmas[-1]}
        self.releases.append(release)
        if self.on_release is not None:  # before the model leaves: a crash after this point is still counted
            self.on_release(release)
        self._relabel(plan)
        metrics = (self._aggregate_metrics([accepted[ok[label]] for label in sorted(ok)], self.train_metrics_aggr_fn,
                                           "aggregate_train") if ok else None)
        return arrays, metrics

    def _relabel(self, plan: Mapping[int, str]) -> None:
        """Give a ``node-<id>`` label the name its node has now given (a public label; no value changes)."""
        taken = set(plan.values())
        entry = self.history[-1]
        for node, label in plan.items():
            name = self.node_names.get(node)
            if not name or name == label or name in taken:
                continue
            self.alpha[name] = self.alpha.pop(label)  # replaces a stale entry of that name (a resumed run)
            for key in ("round_weights", "gaps", "reported_gaps", "rejected"):
                if label in entry[key]:
                    entry[key][name] = entry[key].pop(label)
            entry["cohort"] = sorted(name if c == label else c for c in entry["cohort"])
            entry["participating"] = sorted(name if c == label else c for c in entry["participating"])
            self.releases[-1]["weights"][name] = self.releases[-1]["weights"].pop(label)
            taken.add(name)
        entry["alpha"] = dict(self.alpha)

    # ------------------------------------------------------------------ mechanism
    def _admit(self, present: list[str]) -> None:
        """Newcomers enter with the mean stored weight of the cohort's known members (1/m if none), then all stored
        weights are renormalised: only the cohort's own (relative) weights matter, never an absent entry."""
        new = [n for n in present if n not in self.alpha]
        if not new:
            return
        known = [self.alpha[n] for n in present if n in self.alpha]
        entry = math.fsum(known) / len(known) if known else 1.0 / len(present)
        self.alpha.update(dict.fromkeys(new, entry))
        total = math.fsum(self.alpha.values())
        self.alpha = {n: a / total for n, a in self.alpha.items()}

    def _gaps_for_update(self, gaps: dict[str, float]) -> dict[str, float]:
        if self.gap_noise_multiplier is None:
            return gaps
        return noisy_gaps(gaps, self.gap_noise_multiplier, self._rng)

    def _constrain(self, weights: dict[str, float]) -> dict[str, float]:
        return cap_weights(weights, min(1.0, self.alpha_cap / len(weights)))

    def _aggregate_arrays(self, decoded: list[dict], weights: list[float]) -> ArrayRecord:
        """θ_g + Σ α_i clip(θ_i − θ_g, C) + N(0, (z·2C·max α)² I) over the floating-point arrays; integer
        buffers keep the global model's value (averaging them would be an unprotected release)."""
        assert self._reference is not None
        keys = [k for k, ref in self._reference.items() if np.issubdtype(np.dtype(ref.dtype), np.floating)]
        ref = {k: self._reference[k].numpy().astype(np.float64) for k in self._reference.keys()}
        updates = {str(i): [np.asarray(d[k], np.float64) - ref[k] for k in keys] for i, d in enumerate(decoded)}
        alpha = {str(i): float(w) for i, w in enumerate(weights)}
        noisy, info = dp_weighted_sum(updates, alpha, self.clip, self.noise_multiplier, self._rng)
        self.sigmas.append(info["sigma"])
        new = dict(zip(keys, noisy, strict=True))
        out = {}
        for k, r in self._reference.items():
            value = ref[k] + new[k] if k in new else ref[k]
            out[k] = Array(value.astype(np.dtype(r.dtype)))
        return ArrayRecord(out)

    # ------------------------------------------------------------------ state and accounting
    def dp_settings(self) -> dict[str, Any]:
        """The ``[dp]`` settings this strategy releases with (stored in its state, checked on resume)."""
        return {k: getattr(self, k) for k in DP_SETTINGS}

    def state_dict(self) -> dict[str, Any]:
        """AFFR's state, the ``[dp]`` settings and ``releases_logged`` (releases made so far, all handed to
        :attr:`on_release` before this state exists), checked on resume (:meth:`load_state_dict`)."""
        return {**super().state_dict(), "dp": self.dp_settings(), "releases_logged": len(self.releases)}

    def _settings_diff(self, stored: Mapping[str, Any]) -> list[str]:
        return [f"{k}: checkpoint {stored.get(k)!r}, now {v!r}" for k, v in self.dp_settings().items()
                if stored.get(k) != v]

    def restore_releases(self, releases: list[dict[str, Any]]) -> None:
        """Take over the releases a run directory logged (:func:`fedprint.server.checkpoint.load_releases`), refusing
        any
        made with other ``[dp]`` settings."""
        for r in releases:
            diff = self._settings_diff(r)
            if diff:
                raise ValueError(f"dp_releases: round {r.get('round')} was released with other [dp] settings "
                                 f"({'; '.join(diff)}); restore them or start a new run directory")
        self.releases = [dict(r) for r in releases]
        self._restored = True
        self._check_log()

    def _check_log(self) -> None:
        """Refuse a resume whose restored release log misses a release the checkpoint says was made (module
        docstring, *a resume needs the whole log*); no-op until both the checkpoint and the log are in."""
        if self._expected_log is None or not self._restored:
            return
        done, logged = self._expected_log
        have = {int(r["round"]) for r in self.releases if isinstance(r.get("round"), int | float)}
        missing = [t for t in range(1, done + 1) if t not in have]
        if missing or len(self.releases) < logged:
            shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
            raise ValueError(f"checkpoint/dp_releases.json: the checkpoint says {done} round(s) were done and "
                             f"{logged} release(s) logged, the release log holds {len(self.releases)}"
                             + (f" and none for round(s) {shown}" if missing else "")
                             + "; ε would be under-reported, so the resume is refused. Restore the run's "
                               "dp_releases.json or start a new run directory")

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """AFFR's resume, refused when the checkpoint's ``[dp]`` settings differ from this run's (named)."""
        stored = state.get("dp")
        if stored is None:
            raise ValueError("state: the checkpoint was written without client-level DP; a DP run cannot continue "
                             "it (its earlier rounds were released unprotected); start a new run directory")
        diff = self._settings_diff(stored)
        if diff:
            raise ValueError("state: a resumed client-level DP run must keep its [dp] settings (its rounds so far "
                             f"were released with them); differences: {'; '.join(diff)}. Restore them or start "
                             "a new run directory")
        super().load_state_dict({**state, "dp": None})
        # older checkpoints lack releases_logged: the rounds done still bound it from below (one release a round)
        done = self.rounds_done
        self._expected_log = (done, int(state.get("releases_logged", done)))
        self._check_log()

    def accounting(self) -> dict[str, Any]:
        """The client-level guarantee of every release made so far, each with its own parameters (JSON-able)."""
        eps = composed_epsilon([(r["noise_multiplier"], r["gap_noise_multiplier"]) for r in self.releases],
                               self.delta)
        rounds = sorted({r["round"] for r in self.releases})
        n = max([len(self.alpha), *(r["cohort_size"] for r in self.releases)])
        return {"level": "client", "unit": "institution (one client's whole data replaced)",
                "epsilon": eps, "delta": self.delta, "delta_rule": delta_rule(self.delta, max(n, 1), "clients"),
                "rounds": len(rounds), "releases": len(self.releases),
                "repeated_rounds": sorted({r["round"] for r in self.releases
                                           if sum(x["round"] == r["round"] for x in self.releases) > 1}),
                "noise_multiplier": self.noise_multiplier, "gap_noise_multiplier": self.gap_noise_multiplier,
                "clip": self.clip, "alpha_cap": f"{self.alpha_cap:g}/m",
                "sampling": sampling_statement(self.fraction_train, (r["cohort_size"] for r in self.releases)),
                "accountant": "RDP (Opacus analysis), Gaussian mechanisms composed over every release with the "
                              "parameters each used",
                "not_protected": "raw gaps, gap standard errors and every client metric in the server's own round "
                                 "logs and report (trusted server); the number of clients, their names and who was "
                                 "asked in each round"}
