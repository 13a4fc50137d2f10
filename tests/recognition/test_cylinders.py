"""Minutia Cylinder-Code (recognition/cylinders.py): invariance, the LSS score's pieces, and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from fedprint.recognition import cylinders as cy


def _print(seed: int, n: int = 40) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.c_[rng.uniform(0, 300, (n, 2)), rng.uniform(0, 2 * np.pi, n)]


def _moved(m: np.ndarray, angle: float, shift=(25.0, -40.0), jitter: float = 0.0, seed: int = 0) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    xy = m[:, :2] @ np.array([[c, s], [-s, c]]) + np.asarray(shift)
    out = np.c_[xy, np.mod(m[:, 2] + angle, 2 * np.pi)]
    if jitter:
        rng = np.random.default_rng(seed)
        out[:, :2] += rng.normal(0, jitter, (len(m), 2))
        out[:, 2] += rng.normal(0, np.deg2rad(jitter * 2), len(m))
    return out


def test_a_moved_print_scores_as_its_mate_and_another_print_does_not():
    a = _print(0)
    gallery = [cy.cylinders(_moved(a, 0.6, jitter=2.0))] + [cy.cylinders(_print(s)) for s in range(1, 30)]
    s = cy.lss_scores(cy.cylinders(a), gallery)
    assert cy.lss_scores(cy.cylinders(a), [cy.cylinders(a)])[0] == pytest.approx(1.0)
    assert s[0] > 0.6 and s[0] > 2 * s[1:].max()  # rotation 34 degrees, translation and 2 px noise


def test_bits_follow_the_rotation_of_the_whole_print():
    """A rotation by the print's own frame leaves every cylinder's bits unchanged (cells turn with the minutia)."""
    a = _print(3)
    one, two = cy.cylinders(a), cy.cylinders(_moved(a, 1.1))
    assert len(one) > 10
    same = [np.mean(x == y) for x, y in zip(one.bits, two.bits, strict=False)]
    assert np.median(same) > 0.97  # only the hull's 1-pixel rasterisation and cell-edge rounding differ


def test_a_neighbour_on_a_cell_centre_sets_that_cell_in_its_sector():
    p = cy.DEFAULT
    step = 2 * p.radius / p.ns
    off = (np.arange(p.ns) - (p.ns - 1) / 2) * step
    m = np.array([[100.0, 100.0, 0.0], [100.0 + off[5], 100.0 + off[3], 0.0], [60.0, 160.0, 2.0],
                  [160.0, 40.0, 4.0], [40.0, 40.0, 1.0]])
    c = cy.cylinders(m, cy.CylinderParams(min_valid_cells=0.0))
    bits = c.bits[0].reshape(p.ns, p.ns, p.nd)
    # same direction: sector 2 of 5 is centred on dphi = 0 and holds most of G_D; sector 0 (at -144 degrees) none
    assert bits[5, 3, 2] and not bits[5, 3, 0]


def test_resolution_is_taken_out():
    a = _print(5)
    one, two = cy.cylinders(a), cy.cylinders(np.c_[a[:, :2] * 2, a[:, 2]], dpi=1000.0)
    assert len(one) == len(two) and np.mean(one.bits == two.bits) > 0.99


def test_blocks_and_stacking_do_not_change_the_scores():
    probe = cy.cylinders(_print(7))
    prints = [cy.cylinders(_moved(_print(7), 0.3, jitter=3.0, seed=s)) for s in range(3)] + \
             [cy.cylinders(_print(s)) for s in range(10, 16)] + [cy.cylinders(_print(99, n=1))]
    whole = cy.lss_scores(probe, prints)
    assert np.allclose(whole, cy.lss_scores(probe, cy.stack(prints), block=7))
    assert whole[-1] == 0.0 and len(prints[-1]) == 0  # one minutia: no cylinder, score 0
    assert whole[:3].min() > whole[3:-1].max()


def test_pack_and_unpack_give_the_codes_back():
    prints = [cy.cylinders(_print(s, n=n)) for s, n in ((1, 40), (2, 1), (3, 25))]
    back = cy.unpack(cy.pack(prints))
    assert [len(c) for c in back] == [len(c) for c in prints] and [c.count for c in back] == [40, 1, 25]
    assert all(np.array_equal(a.bits, b.bits) and np.array_equal(a.mask, b.mask) and np.array_equal(a.angle, b.angle)
               for a, b in zip(prints, back, strict=True))
    with pytest.raises(ValueError, match="other parameters"):
        cy.unpack(cy.pack(prints), cy.CylinderParams(ns=16))


def test_lss_pairs_follow_the_smaller_minutiae_count():
    assert cy._n_p(100, 100, cy.DEFAULT) == 12 and cy._n_p(3, 100, cy.DEFAULT) == 4
    assert cy._n_p(20, 60, cy.DEFAULT) == 8  # the sigmoid's midpoint, mu_P = 20


@pytest.mark.parametrize("bad", [np.zeros((4, 2)), np.array([[1.0, np.nan, 0.0]] * 3), np.zeros(6)])
def test_bad_minutiae_tables_are_refused(bad):
    with pytest.raises(ValueError, match="minutiae"):
        cy.cylinders(bad)


def test_on_real_prints_the_code_finds_the_mates_and_needs_the_directions():
    """fvc2002_db1_b (10 fingers x 8): each finger's first impression enrolled, the 70 others searched with the
    NBIS minutiae's cylinders; with the directions shuffled among the minutiae the code must lose most mates."""
    from fedprint.data import minutiae_backends as mb
    from fedprint.data.datasets import load_dataset
    from fedprint.data.real_sets import real_root

    folder = real_root() / "fvc2002_db1_b"
    if not folder.is_dir() or not mb.available("nbis"):
        pytest.skip("needs ../shared/data/real/fvc2002_db1_b and nbis-py (the classical extra)")
    recs = sorted(load_dataset("auto", folder, dpi=None), key=lambda r: (r.identity, r.impression))
    tables = [mb.extract(r.image, "nbis", dpi=r.dpi or 500.0) for r in recs]
    ids = np.array([r.identity for r in recs])
    first = np.array([k == 0 or ids[k] != ids[k - 1] for k in range(len(ids))])
    rng = np.random.default_rng(0)

    def rank1(shuffle: bool) -> float:
        def code(t):
            t = t.copy()
            if shuffle:
                t[:, 2] = rng.permutation(t[:, 2])
            return cy.cylinders(t)
        g = cy.stack([code(t) for t, f in zip(tables, first, strict=True) if f])
        hits = [ids[first][int(np.argmax(cy.lss_scores(code(t), g)))] == ids[k]
                for k, t in enumerate(tables) if not first[k]]
        return float(np.mean(hits))

    real, shuffled = rank1(False), rank1(True)
    assert len(ids) - first.sum() == 70
    print(f"rank-1 {real:.3f} with the directions, {shuffled:.3f} shuffled (70 probes, 10 fingers)")
    assert real >= 0.9 and shuffled < real - 0.3, (real, shuffled)  # measured: 70 of 70 with the directions
