"""ClientApp ``query.publish`` handler: DP-publish one of the node's images through the node's privacy ledger.

Request (``Message`` of type ``query.publish``): a ConfigRecord ``config`` with

* ``mechanism`` (str, a name from :data:`fedprint.privacy.publish.registry.MECHANISMS`), ``variant`` ("sound" /
  "paper", default "sound"), ``epsilon`` (float > 0);
* ``record-index`` (int, index into the node's records, the same order training uses) or ``record-key``
  (str, :attr:`fedprint.data.record.FingerprintRecord.key`);
* optional ``protect`` ("minutia" / "finger", point sets only; a per-finger ledger needs "finger") and
  ``points`` (int, the fixed public number of released points of a "finger" point set; default 32).
  A ``seed`` and a ``round`` are refused: the noise comes from OS entropy only, so no requester can choose it and
  nothing in the reply or the ledger can regenerate it; rounds come from the ledger's own clock.

Node config: ``ledger-path`` (JSON ledger of this institution, relative to ``base-dir``), ``privacy-budget``
(total finger-level ε per finger identity; it must equal the budget the ledger was created with, else every
request is refused naming both), optional ``privacy-window`` + ``privacy-window-epsilon`` (a rate
limit on top of the total), plus
the keys :func:`fedprint.training.node_data.node_client_data` reads to find the node's data. The ledger unit is the
record's finger identity.

Reply: ArrayRecord ``release`` with one array ``image`` (uint8 (H, W)) or ``points`` (float64 (n, 3)), and
ConfigRecord ``guarantee`` (the :class:`fedprint.privacy.publish.base.Guarantee` fields, ``statement``, ``mechanism``,
``variant``, ``spent-epsilon``, ``spent-delta``, ``unit``, ``relation``, ``group``, ``finger-epsilon``,
``finger-delta``, ``remaining-epsilon`` (finger-level)). Any refusal (bad request, unknown mechanism, no
finger-level guarantee, budget exceeded, a data-dependent precondition) replies with a Flower ``Error`` (code
:data:`REFUSED`, reason = the message, never describing the image) and charges nothing; the ledger is committed
only after the release was computed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Error, Message, RecordDict

from fedprint.config.app import client_settings, experiment, resolve
from fedprint.privacy.ledger import Ledger
from fedprint.privacy.publish.release import release
from fedprint.training.node_data import node_client_data

#: Flower error code of a refused publication request.
REFUSED = 4001

#: Query action name: messages of type ``query.publish``.
ACTION = "publish"


def node_ledger(node_config: Mapping[str, Any], base_dir: str | Path | None) -> Ledger:
    """The node's ledger from its config (``ledger-path``, ``privacy-budget``, optional window keys)."""
    if "ledger-path" not in node_config or "privacy-budget" not in node_config:
        raise ValueError("node config: publishing needs 'ledger-path' and 'privacy-budget'")
    window = node_config.get("privacy-window")
    window_eps = node_config.get("privacy-window-epsilon")
    return Ledger(resolve(str(node_config["ledger-path"]), base_dir), float(node_config["privacy-budget"]),
                  window=None if window is None else int(window),
                  window_epsilon=None if window_eps is None else float(window_eps))


def _request(config: ConfigRecord) -> dict[str, Any]:
    for key in ("mechanism", "epsilon"):
        if key not in config:
            raise ValueError(f"request: missing {key!r}")
    if ("record-index" in config) == ("record-key" in config):
        raise ValueError("request: give exactly one of 'record-index' and 'record-key'")
    if "seed" in config:
        raise ValueError("request: 'seed' is not accepted: DP noise comes from OS entropy only (a chosen seed "
                         "would let the requester regenerate the noise and subtract it)")
    if "round" in config:
        raise ValueError("request: 'round' is not accepted: the ledger numbers releases with its own clock")
    unknown = sorted(set(config) - {"mechanism", "variant", "epsilon", "record-index", "record-key", "protect",
                                    "points"})
    if unknown:
        raise ValueError(f"request: unknown key(s) {unknown}")
    return dict(config)


def _find_record(records: list, req: Mapping[str, Any]):
    if "record-index" in req:
        i = req["record-index"]
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(records):
            raise ValueError(f"record-index: expected an integer in [0, {len(records)}), got {i!r}")
        return records[i]
    match = [r for r in records if r.key == req["record-key"]]
    if not match:
        raise ValueError(f"record-key: no record {req['record-key']!r} on this node")
    return match[0]


def publish_handler(msg: Message, context: Context, *, defaults: Mapping[str, Any] | None = None) -> Message:
    """The ``@app.query("publish")`` handler (see the module docstring)."""
    try:
        req = _request(msg.content["config"])
        conf = client_settings(context.run_config, defaults)
        cfg, _, key, base_dir = experiment(conf)
        ledger = node_ledger(context.node_config, base_dir or Path.cwd())
        data, _ = node_client_data(cfg, context.node_config, experiment_key=key, base_dir=base_dir)
        rec = _find_record(data.records, req)
        rng = np.random.default_rng()  # OS entropy; never stored, never chosen by the requester
        options = {"protect": str(req["protect"])} if "protect" in req else {}
        if "points" in req:
            options["size"] = req["points"]
        pub, res, charge = release(str(req["mechanism"]), rec.image, req["epsilon"], rng,
                                   str(req.get("variant", "sound")), ledger=ledger, unit=rec.identity,
                                   image_id=rec.key, **options)
        ledger.commit(res)
    except (ValueError, KeyError, FileNotFoundError) as exc:
        return Message(Error(code=REFUSED, reason=f"publication refused: {exc}"), reply_to=msg)

    name, arr = ("points", pub.points) if pub.image is None else ("image", pub.image)
    g = pub.guarantee
    guarantee = ConfigRecord({
        "dp": bool(g.dp), "epsilon": float(g.epsilon), "delta": float(g.delta), "neighbouring": g.neighbouring,
        "protected": g.protected, "released-exactly": g.released_exactly, "composition": g.composition,
        "caveats": g.caveats, "statement": g.statement(), "mechanism": pub.mechanism, "variant": pub.variant,
        "spent-epsilon": float(pub.spent_epsilon), "spent-delta": float(pub.spent_delta), "unit": rec.identity,
        "record-key": rec.key, "relation": charge.relation, "group": int(charge.group),
        "finger-epsilon": float(charge.epsilon), "finger-delta": float(charge.delta),
        "remaining-epsilon": float(ledger.remaining(rec.identity)),
    })
    release_rec = ArrayRecord(array_dict={name: Array(np.ascontiguousarray(arr))})
    return Message(RecordDict({"release": release_rec, "guarantee": guarantee}), reply_to=msg)
