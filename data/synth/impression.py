"""Impressions of a master fingerprint (SFinGe impression model: Cappelli, Maio, Maltoni 2000-2002).

One impression = the master's ridge pattern seen through

1. a contact area: the silhouette intersected with a displaced ellipse of random size (partial prints);
2. plastic skin distortion (Cappelli, Erol, Maio, Maltoni 2001): a close-contact disk around the contact centre
   stays put, the skin outside moves rigidly (small rotation + translation), and in between the displacement is
   blended with the brake ``b(d) = ½(1 − cos(π d / K))`` of the distance d to the close-contact region;
3. a global rotation and translation (finger placement);
4. skin and sensor: ridge thickness from pressure / dryness (a shift of the ridge profile's threshold), dry-skin
   breaks, lighter pressure towards the contact border, background texture, blotches, blur, contrast and noise;
5. resampling to the profile's output size and resolution (``scale``; anti-aliased when shrinking).

All warps are one vectorised inverse map evaluated with ``cv2.remap``. Ground-truth minutiae and singular points
go through the same forward map and are dropped when they leave the contact area or the image.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from data.record import GroundTruth
from data.synth.master import Master
from data.synth.profiles import Profile

#: Ground-truth minutiae closer than this to the contact border (output px) are dropped: no extractor can see them.
GT_BORDER_PX = 4


@dataclass(frozen=True)
class Placement:
    """The geometric part of one impression (master frame -> output frame), all in master pixels / radians."""

    anchor: np.ndarray        # master point that lands on the output centre, (x, y)
    rotation: float           # global rotation phi
    contact_centre: np.ndarray
    contact_axes: np.ndarray  # ellipse semi-axes (a_x, a_y)
    distortion_rotation: float
    distortion_shift: np.ndarray
    close_contact: float
    brake: float


def _u(rng: np.random.Generator, lo_hi: tuple[float, float]) -> float:
    return float(rng.uniform(lo_hi[0], lo_hi[1])) if lo_hi[1] > lo_hi[0] else float(lo_hi[0])


def sample_placement(master: Master, profile: Profile, rng: np.random.Generator) -> Placement:
    """Draw contact area, distortion and global placement of one impression."""
    ys, xs = np.nonzero(master.mask)
    centroid = np.array([xs.mean(), ys.mean()])
    half = np.array([np.ptp(xs), np.ptp(ys)]) / 2.0
    # The contact centre sits near the core when there is one (fingers are pressed on their pad).
    if len(master.cores):
        centre = 0.5 * centroid + 0.5 * master.cores.mean(axis=0)
    else:
        centre = centroid
    centre = centre + rng.uniform(-1, 1, 2) * profile.contact_offset * half * 2
    axes = half * np.array([_u(rng, profile.contact_fraction), _u(rng, profile.contact_fraction)])
    return Placement(
        anchor=centroid + rng.uniform(-1, 1, 2) * profile.translation_px,
        rotation=np.deg2rad(rng.uniform(-profile.rotation_deg, profile.rotation_deg)),
        contact_centre=centre,
        contact_axes=axes,
        distortion_rotation=np.deg2rad(rng.uniform(-profile.distortion_deg, profile.distortion_deg)),
        distortion_shift=rng.normal(0, profile.distortion_shift_px / np.sqrt(2), 2),
        close_contact=profile.close_contact_px,
        brake=profile.brake_px,
    )


def _rot(phi: float) -> np.ndarray:
    c, s = np.cos(phi), np.sin(phi)
    return np.array([[c, -s], [s, c]])


def _brake(p: np.ndarray, pl: Placement) -> np.ndarray:
    """Brake weight b(d) in [0, 1] of points ``p`` (..., 2), d = distance to the close-contact disk."""
    d = np.maximum(np.linalg.norm(p - pl.contact_centre, axis=-1) - pl.close_contact, 0.0)
    return np.where(d >= pl.brake, 1.0, 0.5 * (1 - np.cos(np.pi * np.minimum(d, pl.brake) / pl.brake)))


def _displacement(p: np.ndarray, pl: Placement) -> np.ndarray:
    """Plastic distortion displacement Δ(p) = b(d(p)) · (R(θ_d)(p − c) + T − (p − c))."""
    rel = p - pl.contact_centre
    rigid = rel @ _rot(pl.distortion_rotation).T + pl.distortion_shift - rel
    return _brake(p, pl)[..., None] * rigid


def forward_map(points: np.ndarray, pl: Placement, out_centre: np.ndarray, scale: float) -> np.ndarray:
    """Master (x, y) -> output (x, y): distortion, then global rotation about the anchor, then scale."""
    distorted = points + _displacement(points, pl)
    return out_centre + scale * (distorted - pl.anchor) @ _rot(pl.rotation).T


def inverse_map(out_xy: np.ndarray, pl: Placement, out_centre: np.ndarray, scale: float,
                iterations: int = 8) -> np.ndarray:
    """Output (x, y) -> master (x, y). The distortion is inverted by fixed-point iteration q = p + Δ(p)
    (Δ is smooth and a few pixels large: 8 iterations reach ~1e-3 px; the map is evaluated on a coarse grid)."""
    q = pl.anchor + ((out_xy - out_centre) / scale) @ _rot(-pl.rotation).T
    p = q.copy()
    for _ in range(iterations):
        p = q - _displacement(p, pl)
    return p


def _remap_grid(shape: tuple[int, int], pl: Placement, out_centre: np.ndarray, scale: float,
                step: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """``cv2.remap`` maps (output pixel -> master point). The map is smooth, so it is evaluated exactly on a
    coarse grid of pixel centres every ``step`` px and bilinearly upsampled (cv2.resize's pixel-centre
    convention makes the coarse samples land exactly on their pixels)."""
    h, w = shape
    nh, nw = -(-h // step), -(-w // step)
    cy = (np.arange(nh) + 0.5) * step - 0.5
    cx = (np.arange(nw) + 0.5) * step - 0.5
    grid = np.stack(np.meshgrid(cx, cy), axis=-1)
    src = inverse_map(grid, pl, out_centre, scale).astype(np.float32)
    full = cv2.resize(src, (nw * step, nh * step), interpolation=cv2.INTER_LINEAR)[:h, :w]
    return np.ascontiguousarray(full[..., 0]), np.ascontiguousarray(full[..., 1])


def _smooth_noise(shape: tuple[int, int], sigma: float, rng: np.random.Generator) -> np.ndarray:
    """Zero-mean, unit-std low-frequency noise (Gaussian-filtered white noise), float32."""
    n = rng.standard_normal(shape).astype(np.float32)
    n = cv2.GaussianBlur(n, (0, 0), max(sigma, 0.5))
    return (n - n.mean()) / (n.std() + 1e-6)


def render_impression(master: Master, profile: Profile, impression: int, *, seed: int
                      ) -> tuple[np.ndarray, GroundTruth]:
    """Render impression ``impression`` of ``master`` under ``profile``.

    Randomness: ``np.random.default_rng([seed, master.identity, impression + 1])`` only, so an impression is
    reproducible on its own, in any order and in any worker.

    Returns
    -------
    image : ndarray uint8 (H, W) with (H, W) = ``profile.output_size``
        Dark ridges on a lighter background.
    ground_truth : GroundTruth
        Pattern, singular points and minutiae in output pixel coordinates.
    """
    rng = np.random.default_rng([int(seed), int(master.identity), int(impression) + 1])
    h, w = profile.output_size
    s = profile.scale
    pl = sample_placement(master, profile, rng)
    out_centre = np.array([(w - 1) / 2.0, (h - 1) / 2.0])

    map_x, map_y = _remap_grid((h, w), pl, out_centre, s)

    ridges = master.ridges
    if s < 1:  # anti-alias before shrinking
        ridges = cv2.GaussianBlur(ridges, (0, 0), 0.45 / s)
    r = cv2.remap(ridges, map_x, map_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=-1.0)

    # Contact area (defined in the master frame): silhouette ∩ ellipse, seen through the same map.
    ell = (((map_x - pl.contact_centre[0]) / pl.contact_axes[0]) ** 2
           + ((map_y - pl.contact_centre[1]) / pl.contact_axes[1]) ** 2) <= 1.0
    silhouette = cv2.remap(master.mask.astype(np.float32), map_x, map_y, cv2.INTER_LINEAR,
                           borderMode=cv2.BORDER_CONSTANT, borderValue=0.0) > 0.5
    contact = silhouette & ell

    # Skin: thickness (threshold shift), dry-skin breaks, lighter pressure near the contact border.
    shift = _u(rng, profile.dryness)
    gain = 3.0 if s >= 1 else 2.0
    ink = 1.0 / (1.0 + np.exp(-gain * (r + shift) * 2.0))
    p_break = _u(rng, profile.breaks)
    if p_break > 0:
        breaks = _smooth_noise((h, w), 1.5 * max(s, 0.5), rng) > np.quantile(rng.standard_normal(4096),
                                                                                 1 - p_break)
        ink = ink * np.where(breaks, 0.25, 1.0)
    dist = cv2.distanceTransform(contact.astype(np.uint8), cv2.DIST_L2, 3)
    fade = np.clip(dist / max(profile.edge_fade_px * max(s, 0.3), 1.0), 0, 1) ** 0.5
    ink = ink * fade * contact

    # Sensor: background with texture, ridge contrast, blotches, blur, noise.
    bg = _u(rng, profile.background)
    img = bg + profile.background_texture * _smooth_noise((h, w), 12 * max(s, 0.3), rng)
    img = img - ink * _u(rng, profile.contrast) * (bg - 20.0)
    n_blot = int(rng.integers(profile.blotches[0], profile.blotches[1] + 1))
    if n_blot:
        blots = np.zeros((h, w), np.float32)
        for _ in range(n_blot):  # a handful of Gaussian blobs, each computed on its own 3-sigma box
            cx, cy = rng.uniform(0, w), rng.uniform(0, h)
            rad = rng.uniform(0.03, 0.12) * min(h, w)
            x0, x1 = int(max(cx - 3 * rad, 0)), int(min(cx + 3 * rad + 1, w))
            y0, y1 = int(max(cy - 3 * rad, 0)), int(min(cy + 3 * rad + 1, h))
            by, bx = np.ogrid[y0:y1, x0:x1]
            amp = rng.choice([-1.0, 1.0]) * rng.uniform(20, 60)
            blots[y0:y1, x0:x1] += amp * np.exp(-((bx - cx) ** 2 + (by - cy) ** 2) / (2 * rad**2))
        img = img + blots * contact
    img = cv2.GaussianBlur(img.astype(np.float32), (0, 0), _u(rng, profile.blur_sigma))
    img = img + rng.normal(0, _u(rng, profile.noise_sigma), (h, w))
    image = np.clip(np.rint(img), 0, 255).astype(np.uint8)

    return image, _ground_truth(master, pl, contact, out_centre, s)


def _ground_truth(master: Master, pl: Placement, contact: np.ndarray, out_centre: np.ndarray,
                  s: float) -> GroundTruth:
    h, w = contact.shape
    inner = cv2.erode(contact.astype(np.uint8), np.ones((2 * GT_BORDER_PX + 1,) * 2, np.uint8)) > 0

    def visible(pts: np.ndarray) -> np.ndarray:
        xi, yi = np.rint(pts[:, 0]).astype(int), np.rint(pts[:, 1]).astype(int)
        ok = (xi >= 0) & (xi < w) & (yi >= 0) & (yi < h)
        ok[ok] = inner[yi[ok], xi[ok]]
        return ok

    m = master.minutiae
    minutiae = np.zeros((0, 4))
    if len(m):
        xy = forward_map(m[:, :2], pl, out_centre, s)
        # Local rotation of the skin: global rotation + the braked part of the distortion rotation.
        theta = (m[:, 2] + pl.rotation + _brake(m[:, :2], pl) * pl.distortion_rotation) % (2 * np.pi)
        keep = visible(xy)
        minutiae = np.column_stack([xy[keep], theta[keep], m[keep, 3]])

    def singular(pts: np.ndarray) -> np.ndarray:
        if not len(pts):
            return np.zeros((0, 2))
        xy = forward_map(pts, pl, out_centre, s)
        ok = (xy[:, 0] >= 0) & (xy[:, 0] < w) & (xy[:, 1] >= 0) & (xy[:, 1] < h)
        return xy[ok]

    return GroundTruth(pattern=master.pattern, cores=singular(master.cores), deltas=singular(master.deltas),
                       minutiae=minutiae)
