"""Impressions of a master fingerprint (SFinGe impression model: Cappelli, Maio, Maltoni 2000-2002).

One impression = the master's ridge pattern seen through

1. a contact area: the silhouette intersected with a displaced ellipse of random size and slightly irregular
   border, centred between the silhouette centroid and the core (partial prints that still overlap);
2. plastic skin distortion (Cappelli, Erol, Maio, Maltoni 2001): a close-contact disk around the contact centre
   stays put, the skin outside moves rigidly (small rotation + translation), and in between the displacement is
   blended with the brake ``b(d) = ½(1 − cos(π d / K))`` of the distance d to the close-contact region; the
   local strain is bounded by :data:`MAX_STRAIN` so that skin stretches but never "melts";
3. a global rotation and translation (finger placement);
4. skin and sensor: ridge thickness from pressure / dryness (a shift of the ridge profile's threshold), dry-skin
   breaks, lighter pressure towards the contact border, background texture, blotches, blur, contrast, noise,
   optional saturation (binarising scanners) and dark scanner-crop strips;
5. resampling to the profile's output size and resolution (``scale``; anti-aliased when shrinking).

All warps are one vectorised inverse map evaluated with ``cv2.remap``. Ground-truth minutiae and singular points
go through the same forward map and are dropped when they leave the contact area or the image.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist

import cv2
import numpy as np

from fedprint.data.record import GroundTruth
from fedprint.data.synth.master import Master
from fedprint.data.synth.profiles import Profile

#: Ground-truth minutiae closer than this to the contact border (output px) are dropped: no extractor can see them.
GT_BORDER_PX = 4
#: Upper bound of the local strain of the plastic distortion (10 % stretch / compression of the skin).
MAX_STRAIN = 0.10
#: Relative roughness of the contact-area border (std of the noise added to the ellipse's normalised radius²).
CONTACT_ROUGHNESS = 0.12


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
    m8 = master.mask.view(np.uint8)
    mom = cv2.moments(m8, binaryImage=True)
    if mom["m00"] == 0:
        raise ValueError(f"master {master.identity}: empty silhouette mask")
    centroid = np.array([mom["m10"] / mom["m00"], mom["m01"] / mom["m00"]])
    _, _, bw, bh = cv2.boundingRect(m8)
    half = np.array([bw - 1, bh - 1]) / 2.0
    # The contact centre sits near the core when there is one (fingers are pressed on their pad).
    if len(master.cores):
        centre = 0.5 * centroid + 0.5 * master.cores.mean(axis=0)
    else:
        centre = centroid
    centre = centre + rng.uniform(-1, 1, 2) * profile.contact_offset * half * 2
    axes = half * np.array([_u(rng, profile.contact_fraction), _u(rng, profile.contact_fraction)])
    anchor = centroid + np.asarray(profile.anchor_shift) * half + rng.uniform(-1, 1, 2) * profile.translation_px
    rotation = np.deg2rad(rng.uniform(-profile.rotation_deg, profile.rotation_deg))
    phi = np.deg2rad(rng.uniform(-profile.distortion_deg, profile.distortion_deg))
    shift = rng.normal(0, profile.distortion_shift_px / np.sqrt(2), 2)
    # Skin is stiff: bound the local strain |∇Δ| <= |φ| + π/(2K) (|T| + |φ| (r_c + K)) (gradient of the
    # braked displacement, the brake's slope peaking at π/(2K)) by MAX_STRAIN, shrinking T and φ together.
    k, rc = profile.brake_px, profile.close_contact_px
    strain = abs(phi) + np.pi / (2 * k) * (np.linalg.norm(shift) + abs(phi) * (rc + k))
    if strain > MAX_STRAIN:
        phi, shift = phi * MAX_STRAIN / strain, shift * MAX_STRAIN / strain
    return Placement(anchor=anchor, rotation=rotation, contact_centre=centre, contact_axes=axes,
                     distortion_rotation=phi, distortion_shift=shift, close_contact=rc, brake=k)


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
    coarse grid every ``step`` px and bilinearly upsampled. With cv2.resize's pixel-centre convention, coarse node
    ``i`` lands on fine coordinate ``(i + 0.5) step - 0.5``; one extra ring of nodes outside the image makes the
    border pixels interpolated too (cv2.resize would otherwise replicate the outermost node, stretching the
    outer ``step / 2`` px of the print)."""
    h, w = shape
    nh, nw = -(-h // step) + 2, -(-w // step) + 2
    cy = (np.arange(nh) - 0.5) * step - 0.5
    cx = (np.arange(nw) - 0.5) * step - 0.5
    grid = np.stack(np.meshgrid(cx, cy), axis=-1)
    src = inverse_map(grid, pl, out_centre, scale).astype(np.float32)
    full = cv2.resize(src, (nw * step, nh * step), interpolation=cv2.INTER_LINEAR)[step:step + h, step:step + w]
    return np.ascontiguousarray(full[..., 0]), np.ascontiguousarray(full[..., 1])


def _smooth_noise(shape: tuple[int, int], sigma: float, rng: np.random.Generator) -> np.ndarray:
    """Zero-mean, unit-std low-frequency noise with correlation length ~``sigma`` px, float32.

    Drawn on a grid ``sigma`` times coarser and upsampled (bilinear), which costs O(H W / sigma²) random numbers
    instead of a large Gaussian filter over a full-resolution white-noise image."""
    h, w = shape
    if sigma <= 2.0:
        n = cv2.GaussianBlur(rng.standard_normal(shape, dtype=np.float32), (0, 0), max(sigma, 0.5))
    else:
        ch, cw = int(np.ceil(h / sigma)) + 3, int(np.ceil(w / sigma)) + 3
        coarse = cv2.GaussianBlur(rng.standard_normal((ch, cw), dtype=np.float32), (0, 0), 0.8)
        coarse = (coarse - coarse.mean()) / (coarse.std() + 1e-6)  # normalise the few coarse samples
        return cv2.resize(coarse, (int(cw * sigma), int(ch * sigma)), interpolation=cv2.INTER_LINEAR)[:h, :w]
    return (n - n.mean()) / (n.std() + 1e-6)


def _blotches(shape: tuple[int, int], count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` soft Gaussian blobs of random sign (dark smudge / light dry patch), amplitude in grey levels.

    Each blob is evaluated on its own 3-sigma box only."""
    h, w = shape
    out = np.zeros(shape, np.float32)
    for _ in range(count):
        cx, cy = rng.uniform(0, w), rng.uniform(0, h)
        rad = rng.uniform(0.03, 0.12) * min(h, w)
        x0, x1 = int(max(cx - 3 * rad, 0)), int(min(cx + 3 * rad + 1, w))
        y0, y1 = int(max(cy - 3 * rad, 0)), int(min(cy + 3 * rad + 1, h))
        by, bx = np.ogrid[y0:y1, x0:x1]
        amp = rng.choice([-1.0, 1.0]) * rng.uniform(20, 60)
        out[y0:y1, x0:x1] += (amp * np.exp(-((bx - cx) ** 2 + (by - cy) ** 2) / (2 * rad**2))).astype(np.float32)
    return out


def render_impression(master: Master, profile: Profile, impression: int, *, seed: int
                      ) -> tuple[np.ndarray, GroundTruth]:
    """Render impression ``impression`` of ``master`` under ``profile``.

    Randomness: ``np.random.default_rng([seed, master.identity, impression + 1])`` only, so an impression is
    reproducible on its own, in any order and in any worker.

    Parameters
    ----------
    master : Master
        The finger (:func:`fedprint.data.synth.master.make_master`).
    profile : Profile
        Domain profile: geometry, skin and sensor ranges (``profiles.toml``).
    impression : int
        Impression index (>= 0).
    seed : int
        Dataset seed.

    Returns
    -------
    image : ndarray uint8 (H, W) with (H, W) = ``profile.output_size``
        Dark ridges on a lighter background.
    ground_truth : GroundTruth
        Pattern, singular points and minutiae in output pixel coordinates.
    """
    if impression < 0:
        raise ValueError(f"impression: expected an index >= 0, got {impression}")
    rng = np.random.default_rng([int(seed), int(master.identity), int(impression) + 1])
    h, w = profile.output_size
    s = profile.scale
    pl = sample_placement(master, profile, rng)
    out_centre = np.array([(w - 1) / 2.0, (h - 1) / 2.0])

    map_x, map_y = _remap_grid((h, w), pl, out_centre, s)

    ridges = master.ridges.astype(np.float32, copy=False)
    if s < 1:  # anti-alias before shrinking
        ridges = cv2.GaussianBlur(ridges, (0, 0), 0.45 / s)
    r = cv2.remap(ridges, map_x, map_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=-1.0)

    # Contact area (defined in the master frame): silhouette ∩ ellipse, seen through the same map.
    # The ellipse's border is made irregular by low-frequency noise (real contact borders are not conics).
    rho = (np.square((map_x - np.float32(pl.contact_centre[0])) / np.float32(pl.contact_axes[0]))
           + np.square((map_y - np.float32(pl.contact_centre[1])) / np.float32(pl.contact_axes[1])))
    ell = rho <= 1.0 + np.float32(CONTACT_ROUGHNESS) * _smooth_noise((h, w), 40 * s, rng)
    silhouette = cv2.remap(master.mask.view(np.uint8), map_x, map_y, cv2.INTER_NEAREST,
                           borderMode=cv2.BORDER_CONSTANT, borderValue=0) > 0
    contact = silhouette & ell

    # Skin: ridge thickness by a shift of the ridge profile's threshold (> 0 wet / pressed: thick, merging
    # ridges; < 0 dry: thin ridges), dry-skin breaks, lighter pressure towards the contact border.
    shift = np.float32(_u(rng, profile.dryness))
    gain = np.float32(2.0 * _u(rng, profile.ink_gain))
    ink = 1.0 / (1.0 + np.exp(-gain * (r + shift)))
    p_break = _u(rng, profile.breaks)
    if p_break > 0:
        level = NormalDist().inv_cdf(1.0 - p_break)  # breaks cover a fraction p_break of the skin
        breaks = _smooth_noise((h, w), 1.5 * max(s, 0.5), rng) > level
        ink[breaks] *= 0.25
    dist = cv2.distanceTransform(contact.view(np.uint8), cv2.DIST_L2, 3)
    fade = np.sqrt(np.clip(dist * np.float32(1.0 / max(profile.edge_fade_px * max(s, 0.3), 1.0)), 0, 1))
    ink *= fade

    # Sensor: background with texture, ridge contrast, blotches, blur, noise, saturation, scanner frame.
    bg = _u(rng, profile.background)
    img = np.float32(bg) + np.float32(profile.background_texture) * _smooth_noise((h, w), 12 * max(s, 0.3), rng)
    img -= ink * np.float32(_u(rng, profile.contrast) * (bg - 20.0))
    n_blot = int(rng.integers(profile.blotches[0], profile.blotches[1] + 1))
    if n_blot:
        img += _blotches((h, w), n_blot, rng) * contact
    img = cv2.GaussianBlur(img, (0, 0), max(_u(rng, profile.blur_sigma), 0.05))
    img += np.float32(_u(rng, profile.noise_sigma)) * rng.standard_normal((h, w), dtype=np.float32)
    if profile.saturation != 1.0:  # binarising scanners (SOCOFing): stretch about mid-grey, then clip
        img = np.float32(127.5) + np.float32(profile.saturation) * (img - np.float32(127.5))
    _scanner_frame(img, profile.frame_px, rng)
    image = np.clip(np.rint(img), 0, 255).astype(np.uint8)

    return image, _ground_truth(master, pl, contact, out_centre, s)


def _scanner_frame(img: np.ndarray, frame_px: tuple[int, int], rng: np.random.Generator) -> None:
    """Dark strips of ``frame_px`` width along random image edges (crop border of some scanners), in place."""
    if frame_px[1] <= 0:
        return
    for edge in range(4):
        width = int(rng.integers(frame_px[0], frame_px[1] + 1))
        if rng.random() < 0.5 or width == 0:
            continue
        value = rng.uniform(0.0, 60.0)
        if edge == 0:
            img[:width] = value
        elif edge == 1:
            img[-width:] = value
        elif edge == 2:
            img[:, :width] = value
        else:
            img[:, -width:] = value


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
