"""One validated reader for fingerprint image files: 8-bit grayscale out, or an error naming the file and why.

Decoder choice (measured with Pillow 13 / OpenCV 5; the cases are in ``tests/test_datasets.py``): neither
decoder catches every truncation. ``cv2.imread`` returns ``None`` without a reason, and returns the image
for a TIFF whose trailing directory (IFD) is cut by 1-4 bytes. Pillow's ``load()`` raises with a reason in
most cases but accepts a PNG missing the tail of its IEND chunk, a TIFF with a cut trailing IFD (it only warns
"Corrupt EXIF data") and a BMP cut inside the row padding of its last row. So Pillow decodes, and explicit
checks close those gaps: a Pillow warning about corrupt / truncated data is an error, a PNG must end with a
complete IEND chunk, and every TIFF strip or tile and every BMP pixel row must lie inside the file.

Bit depth is read from the file header (PNG IHDR, TIFF BitsPerSample/SampleFormat, BMP biBitCount) before the
decoded mode is trusted, because Pillow silently reduces 16-bit-per-channel RGB PNGs to 8-bit RGB.
"""

from __future__ import annotations

import io
import re
import struct
import warnings
from pathlib import Path

import numpy as np
from PIL import Image

#: File suffixes (lower case) the dataset loaders treat as images.
IMAGE_SUFFIXES = (".png", ".bmp", ".tif", ".tiff")
#: Largest image read (pixels): 4096 x 4096, i.e. 8 x 8 inches at 500 dpi or a ten-print card at 1000 dpi. Checked
#: from the header before decoding, so an oversized file costs nothing (a point-set release of an 8000 x 8000 image
#: would need about 8 GB).
MAX_PIXELS = 4096 * 4096

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_IEND = b"\x00\x00\x00\x00IEND\xaeB`\x82"

# Pillow modes that are not 8 bits per sample, with the wording used in the error message.
_REJECTED_MODES = {
    "1": "1-bit bilevel",
    "I": "32-bit integer",
    "I;16": "16-bit",
    "I;16L": "16-bit",
    "I;16B": "16-bit",
    "I;16N": "16-bit",
    "F": "32-bit float",
    "CMYK": "CMYK colour",
    "YCbCr": "YCbCr colour",
    "LAB": "Lab colour",
    "HSV": "HSV colour",
    "RGBa": "premultiplied RGBA",
    "La": "premultiplied LA",
}


#: Magic numbers of files that are often renamed to an image suffix by mistake, for the error message.
_NOT_IMAGES = ((b"%PDF", "PDF"), (b"PK\x03\x04", "ZIP (or DOCX / XLSX)"), (b"RIFF", "RIFF (AVI / WAV)"),
              (b"<", "text / HTML / XML"), (b"{", "JSON / text"))


class ImageReadError(ValueError):
    """An image file cannot be used as an 8-bit grayscale fingerprint.

    Attributes
    ----------
    path : str
        The offending file.
    reason : str
        What is wrong and what was expected (without the path).
    """

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{path}: {reason}")


def read_gray(path: str | Path) -> np.ndarray:
    """Read one fingerprint image as a 2-D uint8 array, exactly as stored (never resized or rescaled).

    Accepted: 8-bit grayscale (PNG, BMP, TIFF, incl. palette images whose palette is gray), and 8-bit RGB /
    RGBA / LA images that are gray in disguise. Conversion rule for those (nothing else is converted):

    * every pixel must have R == G == B (the gray value is that common value), and
    * an alpha channel, if present, must be inert: compositing the gray over black with that alpha must leave
      every pixel unchanged, i.e. ``round(gray * alpha / 255) == gray`` (alpha 255, or gray 0 where
      transparent).

    SOCOFing's ``Real/`` images are of exactly this kind (32-bit BMP, B == G == R, alpha 0 only on pixels
    whose gray value is 0; SOCOFing's own 8-bit altered versions of the same prints hold 0 there too), so the
    rule reads them losslessly. Anything else with colour or a meaningful alpha is rejected rather than
    guessed at.

    Parameters
    ----------
    path : str or Path
        Image file.

    Returns
    -------
    image : ndarray of uint8, shape (H, W)

    Raises
    ------
    ImageReadError
        Missing, empty, truncated or undecodable file; multi-page file; bit depth other than 8 (1/4-bit,
        16-bit, float, signed); colour or alpha that is not gray-equivalent. The message names the file and
        what was expected.
    """
    path = Path(path)
    if not path.is_file():
        raise ImageReadError(path, "file does not exist or is not a regular file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ImageReadError(path, f"cannot read file ({exc.strerror or exc})") from exc
    if not data:
        raise ImageReadError(path, "empty file (0 bytes); expected an 8-bit grayscale image")

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")  # before open(): header parsing warns too, and never deduplicate
            with Image.open(io.BytesIO(data)) as im:
                fmt = im.format or "unknown"
                if im.size[0] * im.size[1] > MAX_PIXELS:
                    raise ImageReadError(path, f"{fmt} image of {im.size[0]}x{im.size[1]} pixels is larger than"
                                               f" the {MAX_PIXELS:,} (4096x4096) FedPrint reads; crop or downscale it")
                _check_header_depth(path, fmt, data, im)
                if getattr(im, "n_frames", 1) != 1:
                    pages = im.n_frames
                    raise ImageReadError(path, f"{fmt} file holds {pages} pages; expected a single image")
                im.load()
                if fmt == "TIFF":
                    _check_tiff_extents(path, data, im)
                elif fmt == "BMP":
                    _check_bmp_extent(path, data)
                arr = _to_gray(path, im)
        # Pillow only *warns* when a TIFF directory is cut short ("Corrupt EXIF data ... only got 3 bytes").
        damaged = [str(w.message) for w in caught if re.search(r"corrupt|truncat", str(w.message), re.I)]
        if damaged:
            raise ImageReadError(path, f"truncated or corrupt {fmt} ({damaged[0].strip()})")
    except ImageReadError:
        raise
    except Image.DecompressionBombError as exc:
        raise ImageReadError(path, f"image too large to decode safely ({exc})") from exc
    except Image.UnidentifiedImageError as exc:
        head = data[:8]
        kind = next((name for magic, name in _NOT_IMAGES if head.startswith(magic)), None)
        what = f"a {kind} file" if kind else f"not an image format FedPrint reads (it starts with {head!r})"
        raise ImageReadError(path, f"{what}, not an image; expected an 8-bit grayscale PNG, BMP or TIFF") from exc
    except (OSError, SyntaxError, ValueError, struct.error, EOFError) as exc:
        what = "truncated or corrupt" if "truncat" in str(exc).lower() else "cannot decode image"
        raise ImageReadError(path, f"{what} ({type(exc).__name__}: {exc})") from exc

    if fmt == "PNG" and not data.endswith(_PNG_IEND):
        raise ImageReadError(path, "truncated PNG: the file does not end with a complete IEND chunk")
    if arr.size == 0:
        raise ImageReadError(path, f"image has no pixels (shape {arr.shape})")
    return arr


def _check_header_depth(path: Path, fmt: str, data: bytes, im: Image.Image) -> None:
    """Reject bit depths other than 8 from the header, before Pillow's mode conversion can hide them."""
    if fmt == "PNG" and data.startswith(_PNG_SIGNATURE) and len(data) >= 26:
        depth = data[24]
        if depth != 8:
            raise ImageReadError(path, f"PNG has {depth} bits per sample; expected 8-bit")
    elif fmt == "TIFF":
        bits = im.tag_v2.get(258, (1,))
        bits = bits if isinstance(bits, tuple) else (bits,)
        if any(b != 8 for b in bits):
            raise ImageReadError(path, f"TIFF has {'/'.join(map(str, bits))} bits per sample; expected 8-bit")
        sample_format = im.tag_v2.get(339, (1,))
        sample_format = sample_format if isinstance(sample_format, tuple) else (sample_format,)
        if any(s != 1 for s in sample_format):
            names = {2: "signed integer", 3: "floating point"}
            kind = ", ".join(names.get(s, f"SampleFormat {s}") for s in sample_format if s != 1)
            raise ImageReadError(path, f"TIFF samples are {kind}; expected unsigned 8-bit")
    elif fmt == "BMP" and len(data) >= 34 and struct.unpack_from("<I", data, 14)[0] >= 40:
        bpp = struct.unpack_from("<H", data, 28)[0]
        if bpp not in (8, 24, 32):
            raise ImageReadError(
                path, f"BMP has {bpp} bits per pixel; expected 8 (gray) or 24/32 (gray stored as RGB)"
            )
    if im.mode in _REJECTED_MODES:
        kind = _REJECTED_MODES[im.mode]
        raise ImageReadError(path, f"{kind} image (mode {im.mode}); expected 8-bit grayscale")


def _check_tiff_extents(path: Path, data: bytes, im: Image.Image) -> None:
    """Every strip / tile the IFD points to must lie inside the file (truncation the decoder may tolerate)."""
    for off_tag, cnt_tag in ((273, 279), (324, 325)):
        offsets, counts = im.tag_v2.get(off_tag), im.tag_v2.get(cnt_tag)
        if offsets is None or counts is None:
            continue
        offsets = offsets if isinstance(offsets, tuple) else (offsets,)
        counts = counts if isinstance(counts, tuple) else (counts,)
        end = max((o + c for o, c in zip(offsets, counts, strict=False)), default=0)
        if end > len(data):
            raise ImageReadError(
                path, f"truncated TIFF: image data extends to byte {end} but the file has {len(data)} bytes"
            )


def _check_bmp_extent(path: Path, data: bytes) -> None:
    """Uncompressed BMP rows (padded to 4 bytes) must all be in the file: Pillow tolerates a cut inside the
    padding of the last row."""
    if len(data) < 34 or struct.unpack_from("<I", data, 14)[0] < 40:
        return  # OS/2 core header: left to the decoder
    offset = struct.unpack_from("<I", data, 10)[0]
    width, height, _, bpp, compression = struct.unpack_from("<iiHHI", data, 18)
    if compression not in (0, 3, 6):  # BI_RGB, BI_BITFIELDS, BI_ALPHABITFIELDS
        return
    end = offset + ((abs(width) * bpp + 31) // 32) * 4 * abs(height)
    if end > len(data):
        raise ImageReadError(
            path, f"truncated BMP: pixel rows extend to byte {end} but the file has {len(data)} bytes"
        )


def _to_gray(path: Path, im: Image.Image) -> np.ndarray:
    """Decoded Pillow image -> 2-D uint8, applying the gray-equivalence rule of :func:`read_gray`."""
    mode = im.mode
    if mode == "L":
        return np.array(im, dtype=np.uint8)
    if mode in ("P", "PA"):
        has_alpha = mode == "PA" or "transparency" in im.info
        im = im.convert("RGBA" if has_alpha else "RGB")
        mode = im.mode
    if mode not in ("LA", "RGB", "RGBA", "RGBX"):
        raise ImageReadError(path, f"unsupported image mode {mode}; expected 8-bit grayscale")
    arr = np.array(im, dtype=np.uint8)
    if mode == "RGBX":
        arr, mode = arr[..., :3], "RGB"
    n_color = 1 if mode == "LA" else 3
    gray = arr[..., 0]
    if n_color == 3:
        differs = np.count_nonzero((arr[..., 1] != gray) | (arr[..., 2] != gray))
        if differs:
            raise ImageReadError(
                path,
                f"{mode} image with colour ({differs} of {gray.size} pixels have R, G, B not all equal); "
                "expected grayscale (R == G == B everywhere) — convert it explicitly",
            )
    if mode in ("LA", "RGBA"):
        alpha = arr[..., n_color].astype(np.uint16)
        composited = (gray.astype(np.uint16) * alpha + 127) // 255
        changed = np.count_nonzero(composited != gray)
        if changed:
            raise ImageReadError(
                path,
                f"{mode} image whose alpha channel changes {changed} of {gray.size} pixels when composited; "
                "expected an opaque image (or alpha 0 only where gray is 0) — flatten it explicitly",
            )
    return np.ascontiguousarray(gray)


#: Resolutions a file may state that are taken as its scan resolution (dots per inch). Outside this range a stated
#: value is a software default, not a scanner's: 72 and 96 (screen defaults written by image editors and by
#: SOCOFing's BMPs), 1 (FVC TIFFs).
FILE_DPI_RANGE = (100.0, 2000.0)


def read_dpi(path: str | Path) -> tuple[float | None, str]:
    """Resolution stated in an image file's header, if it is a plausible scan resolution.

    Returns
    -------
    dpi : float or None
        The horizontal resolution in dots per inch (PNG pHYs, TIFF X/YResolution, BMP pixels per metre), rounded
        to 0.1; None when the file states none or one outside :data:`FILE_DPI_RANGE`.
    note : str
        What the file says, for messages: ``"file: 500 dpi"``, ``"file states 96 dpi (a software default, not a
        scan resolution)"`` or ``"file states no resolution"``.
    """
    try:
        with Image.open(path) as im:
            stated = im.info.get("dpi")
    except (OSError, SyntaxError, ValueError) as exc:
        raise ImageReadError(path, f"cannot read the image header ({type(exc).__name__}: {exc})") from exc
    if not stated:
        return None, "the file states no resolution"
    x = round(float(stated[0] if isinstance(stated, tuple | list) else stated), 1)
    lo, hi = FILE_DPI_RANGE
    if not (lo <= x <= hi):
        return None, f"the file states {x:g} dpi, a software default, not a scan resolution"
    return x, f"file: {x:g} dpi"
