"""Alignment helper data for the vault: a coarse orientation field, and registration of a probe against it.

Stored with a vault (Nandakumar, Jain & Pankanti 2007 store high-curvature points of the orientation field for
the same purpose). **What it reveals**: the enrolment impression's ridge *flow* — the orientation (modulo pi,
quantised to 16 levels of 11.25 degrees) of every 8 x 8 px block of the foreground, computed from the gradient
structure tensor smoothed over ~8 px, and the foreground outline. That gives the pattern class, the singular
points and the print's extent. It contains **no minutia**: the smoothed orientation is continuous across ridge
endings and bifurcations, and no position, direction or type of a minutia is stored. It is nevertheless a
biometric feature: two helper records of one finger can be matched to link templates (measured by
:mod:`fedprint.attacks.template_attacks`); the password-hardened vault therefore masks it with the password key.

Registration (:func:`register`): for every rotation in a grid, the probe's block field (as the doubled-angle
vector field ``exp(2i theta)``) is rotated and cross-correlated with the stored one by FFT; the rotation and
block shift with the highest mean agreement over the overlap win. :func:`refine` then corrects the translation
to pixel level by Hough voting of probe minutiae against reference points (vault points: chaff only adds
uniform votes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedprint.data.minutiae import orientation_field, segment

#: Block size (pixels) of the helper orientation field and number of orientation levels stored.
BLOCK = 8
LEVELS = 16
#: Stored value of a background block.
BACKGROUND = 255


@dataclass(frozen=True)
class Pose:
    """Rigid map probe -> enrolment frame: ``x_e = R(angle) (x_p - centre) + centre + shift``; directions + angle."""

    angle: float
    centre: tuple[float, float]
    shift: tuple[float, float]
    score: float

    def apply(self, minutiae: np.ndarray) -> np.ndarray:
        """Minutiae rows (x, y, direction, ...) mapped into the enrolment frame (a copy)."""
        m = np.array(minutiae, dtype=np.float64, copy=True)
        if m.size == 0:
            return m.reshape(0, 4)
        c, s = np.cos(self.angle), np.sin(self.angle)
        dx, dy = m[:, 0] - self.centre[0], m[:, 1] - self.centre[1]
        m[:, 0] = c * dx - s * dy + self.centre[0] + self.shift[0]
        m[:, 1] = s * dx + c * dy + self.centre[1] + self.shift[1]
        m[:, 2] = np.mod(m[:, 2] + self.angle, 2 * np.pi)
        return m


def helper_field(image: np.ndarray) -> np.ndarray:
    """Helper data of one impression: uint8 (ceil(H/8), ceil(W/8)); orientation level 0..15 or 255 (background)."""
    theta, _ = orientation_field(image, sigma=8.0)
    mask = segment(image)
    h, w = image.shape
    gh, gw = -(-h // BLOCK), -(-w // BLOCK)
    pad = ((0, gh * BLOCK - h), (0, gw * BLOCK - w))
    z = np.pad(np.exp(2j * theta), pad).reshape(gh, BLOCK, gw, BLOCK).mean(axis=(1, 3))
    fg = np.pad(mask, pad).reshape(gh, BLOCK, gw, BLOCK).mean(axis=(1, 3)) > 0.5
    level = np.round(np.mod(np.angle(z), 2 * np.pi) / (2 * np.pi) * LEVELS).astype(np.int64) % LEVELS
    return np.where(fg, level, BACKGROUND).astype(np.uint8)


def _complex(field: np.ndarray) -> np.ndarray:
    fg = field != BACKGROUND
    return np.where(fg, np.exp(1j * 2 * np.pi * field.astype(np.float64) / LEVELS), 0)


def register(probe_field: np.ndarray, enrol_field: np.ndarray, *, max_angle: float = np.deg2rad(45),
             step: float = np.deg2rad(3), min_overlap: float = 0.3) -> Pose:
    """Best rigid pose of a probe's helper field against the enrolment's (coarse: 1 block, ``step`` radians).

    Parameters
    ----------
    probe_field, enrol_field : uint8 arrays from :func:`helper_field`
    max_angle, step : float
        Rotation search range +-max_angle (radians) and step.
    min_overlap : float
        Minimum overlap as a fraction of the smaller foreground; poses with less are not considered.
    """
    ze = _complex(enrol_field)
    me = (enrol_field != BACKGROUND).astype(np.float64)
    pr, pc = np.nonzero(probe_field != BACKGROUND)
    if len(pr) == 0 or me.sum() == 0:
        return Pose(0.0, (0.0, 0.0), (0.0, 0.0), -1.0)
    pz = np.exp(1j * 2 * np.pi * probe_field[pr, pc].astype(np.float64) / LEVELS)
    gh, gw = probe_field.shape
    centre = (gw * BLOCK / 2.0, gh * BLOCK / 2.0)
    eh, ew = enrol_field.shape
    size = (eh + 2 * max(gh, gw) + 2, ew + 2 * max(gh, gw) + 2)
    off = max(gh, gw) + 1  # probe canvas offset so rotated blocks stay inside
    fe = np.fft.fft2(ze, size)
    fm = np.fft.fft2(me, size)
    need = min_overlap * min(len(pr), me.sum())
    best = (-np.inf, 0.0, 0, 0)
    for a in np.arange(-max_angle, max_angle + 1e-9, step):
        c, s = np.cos(a), np.sin(a)
        x = (pc + 0.5) * BLOCK - centre[0]
        y = (pr + 0.5) * BLOCK - centre[1]
        bx = np.floor((c * x - s * y + centre[0]) / BLOCK).astype(np.int64) + off
        by = np.floor((s * x + c * y + centre[1]) / BLOCK).astype(np.int64) + off
        zp = np.zeros(size, complex)
        mp = np.zeros(size)
        zp[by % size[0], bx % size[1]] = pz * np.exp(2j * a)
        mp[by % size[0], bx % size[1]] = 1.0
        # correlation over shifts t: sum_p ze(p) conj(zp(p - t)) -> ifft(fe * conj(fft(zp))) gives lag p_e - p_p
        corr = np.fft.ifft2(fe * np.conj(np.fft.fft2(zp))).real
        overlap = np.fft.ifft2(fm * np.conj(np.fft.fft2(mp))).real
        score = np.where(overlap >= need, corr / np.maximum(overlap, 1.0), -np.inf)
        k = int(np.argmax(score))
        if score.flat[k] > best[0]:
            ty, tx = np.unravel_index(k, size)
            best = (float(score.flat[k]), float(a), int(ty), int(tx))
    score, a, ty, tx = best
    # lag t means enrol block = probe canvas block + t (mod size); canvas block = probe block + off
    ty = ty - size[0] if ty > size[0] // 2 else ty
    tx = tx - size[1] if tx > size[1] // 2 else tx
    # canvas block m maps to enrol block m + t, canvas block = floor(rotated pixel / BLOCK) + off
    return Pose(a, centre, (float((tx + off) * BLOCK), float((ty + off) * BLOCK)), score)


def refine(pose: Pose, probe: np.ndarray, reference: np.ndarray, *, radius: float = 24.0, bin_px: float = 4.0,
           angle_tol: float = np.deg2rad(30), min_votes: int = 3) -> Pose:
    """Pixel-level translation correction by Hough voting of aligned probe minutiae against reference points.

    Parameters
    ----------
    pose : Pose
        Coarse pose from :func:`register`.
    probe : (n, >=3) minutiae of the probe (x, y, direction) in its own image.
    reference : (m, >=3) points (x, y, direction) in the enrolment frame (vault element centres or minutiae).
    radius, bin_px : float
        Largest correction considered and vote bin size (pixels).
    angle_tol : float
        Pairs whose directions differ by more than this do not vote.
    min_votes : int
        Below this peak the coarse pose is kept.
    """
    if len(probe) == 0 or len(reference) == 0:
        return pose
    p = pose.apply(probe)
    d = reference[None, :, :2] - p[:, None, :2]
    da = np.abs(np.angle(np.exp(1j * (reference[None, :, 2] - p[:, None, 2]))))
    ok = (np.abs(d[..., 0]) <= radius) & (np.abs(d[..., 1]) <= radius) & (da <= angle_tol)
    if ok.sum() < min_votes:
        return pose
    v = d[ok]
    nb = int(2 * radius / bin_px) + 1
    idx = np.clip(np.floor((v + radius) / bin_px).astype(int), 0, nb - 1)
    hist = np.zeros((nb, nb))
    np.add.at(hist, (idx[:, 1], idx[:, 0]), 1)
    # 3x3 window sums so a peak split across bins still wins
    pad = np.pad(hist, 1)
    win = sum(pad[i:i + nb, j:j + nb] for i in range(3) for j in range(3))
    by, bx = np.unravel_index(int(np.argmax(win)), win.shape)
    if win[by, bx] < min_votes:
        return pose
    sel = (np.abs(idx[:, 1] - by) <= 1) & (np.abs(idx[:, 0] - bx) <= 1)
    corr = np.median(v[sel], axis=0)
    return Pose(pose.angle, pose.centre, (pose.shift[0] + float(corr[0]), pose.shift[1] + float(corr[1])),
                pose.score)
