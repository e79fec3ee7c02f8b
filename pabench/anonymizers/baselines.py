"""Reference baselines from the papers: downsampling and obfuscation (registered on import).

Downsampling (Liu/Wu et al. TPAMI: rates 2, 4, 8, 16) averages each frame over f x f pixel areas
and shows the low-resolution frame at the input size by nearest-neighbour upsampling: the output
holds exactly the low-resolution information ("lower resolution"), nothing is interpolated in,
and the anonymizer contract (same shape) holds.

Obfuscation follows the TPAMI grid {box, seg} x {black, blur} x {face, body}, with the SPAct
supplement's (section C.6) Gaussian blurs: strong = kernel 21, sigma 10; weak = kernel 13,
sigma 10, defined on the papers' 112-pixel frames. Kernel and sigma are scaled by
min(H, W) / 112 (kernel rounded to an odd size, at least 3) so a blur removes the same share of
the picture at any resolution: on pa-synth 32 px frames strong is k7/s2.86 and weak k5/s2.86,
on 64 px strong is k13/s5.71 and weak k7/s5.71. The blur is applied to the whole frame with
reflect padding and composited inside the region. Blackening sets the region to 0.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
import torchvision.transforms.functional as TF
from torch import nn

from pabench.anonymizers import ANONYMIZERS, FAMILIES, AnonymizerSpec, BuildContext
from pabench.anonymizers.segmenter import SegmenterMasker
from pabench.anonymizers.segmenter import load_or_train as load_segmenter
from pabench.data.synth import get_preset
from pabench.errors import PabenchError, unknown_name
from pabench.runtime import check_device
from pabench.submission import check_format, export_submission

REFERENCE_SIZE = 112  # frame size the papers' blur kernels were chosen for
BLURS = {"strong": (21, 10.0), "weak": (13, 10.0)}  # SPAct supplement, section C.6
DOWNSAMPLE_FACTORS = (2, 4, 8, 16)
BOX_ROUNDS = 12  # fixed rounds for exportable modules; pa-synth masks measured to need <= 7
_TARGET_CHANNEL = {"body": 0, "face": 1}  # channel order of every masker's output


class Downsample(nn.Module):
    """Area-average each frame by `factor`, then nearest-upsample back to the input size."""

    def __init__(self, factor: int) -> None:
        super().__init__()
        self.factor = factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t, h, w = x.shape[2], x.shape[3], x.shape[4]
        low = F.adaptive_avg_pool3d(x, [t, max(1, h // self.factor), max(1, w // self.factor)])
        return F.interpolate(low, size=[t, h, w], mode="nearest")


def scaled_blur(kernel: int, sigma: float, size: int,
                reference: int = REFERENCE_SIZE) -> tuple[int, float]:
    """The papers' (kernel, sigma) at 112 px rescaled to a frame whose short side is `size`."""
    scale = size / reference
    return max(3, int(round(kernel * scale)) // 2 * 2 + 1), sigma * scale


def _run_max(lab: torch.Tensor, on: torch.Tensor) -> torch.Tensor:
    """Give every pixel the maximum label of its horizontal run of `on` pixels [N, H, W]."""
    n, h, w = on.shape
    prev = F.pad(on[:, :, :-1], [1, 0])
    run = (on & ~prev).long().cumsum(2)  # run number within the row (off pixels: any)
    rows = torch.arange(n * h, device=on.device).view(n, h, 1)
    gid = (rows * (w + 1) + run).reshape(-1)
    best = torch.full([n * h * (w + 1)], -1.0, dtype=lab.dtype, device=lab.device)
    best = best.scatter_reduce(0, gid, lab.reshape(-1), "amax")
    return torch.where(on, best.gather(0, gid).view(n, h, w), lab)


def components(on: torch.Tensor, rounds: int, early_exit: bool = False) -> torch.Tensor:
    """8-connected component labels of `on` [N, H, W] bool: the largest flat pixel index in the
    component (float, exact below 2**24 pixels per frame); -1 off the mask.

    Each round spreads labels along whole row runs, whole column runs, then one pixel
    diagonally, so a round crosses any straight stretch at once; blob-like regions (people,
    faces) converge in a few rounds. torch.export needs the fixed `rounds`; `early_exit`
    stops as soon as a round changes nothing.
    """
    n, h, w = on.shape
    idx = torch.arange(h * w, device=on.device, dtype=torch.float32).view(1, h, w)
    lab = torch.where(on, idx, -1.0)
    on_t = on.transpose(1, 2)
    for _ in range(rounds):
        prev = lab
        lab = _run_max(lab, on)
        lab = _run_max(lab.transpose(1, 2), on_t).transpose(1, 2)
        lab = torch.where(on, F.max_pool2d(lab[:, None], 3, stride=1, padding=1)[:, 0], lab)
        if early_exit and torch.equal(lab, prev):
            break
    return lab


def box_hull(mask: torch.Tensor, rounds: int, early_exit: bool = False) -> torch.Tensor:
    """Replace each 8-connected region of `mask` [N, 1, H, W] in {0, 1} by its bounding box.

    Extents per component come from scatter min/max over its label; the boxes are painted
    with a 2-D difference array, so the cost does not depend on the number of regions.
    Overlapping boxes merge.
    """
    n, _, h, w = mask.shape
    on = mask[:, 0] > 0.5
    lab = components(on, rounds, early_exit).long().clamp(min=0)
    gid = (lab + torch.arange(n, device=mask.device).view(n, 1, 1) * (h * w)).reshape(-1)
    ys = torch.arange(h, device=mask.device).view(1, h, 1).expand(n, h, w).reshape(-1)
    xs = torch.arange(w, device=mask.device).view(1, 1, w).expand(n, h, w).reshape(-1)
    keep = on.reshape(-1)
    big = torch.full([n * h * w], h + w, device=mask.device)
    small = torch.full([n * h * w], -1, device=mask.device)
    y0 = _extent(ys, keep, big, gid, "amin").view(n, h, w)
    x0 = _extent(xs, keep, big, gid, "amin").view(n, h, w)
    y1 = _extent(ys, keep, small, gid, "amax").view(n, h, w)
    x1 = _extent(xs, keep, small, gid, "amax").view(n, h, w)
    return _paint_boxes(on, y0, x0, y1, x1)[:, None].to(mask.dtype)


def _extent(v: torch.Tensor, keep: torch.Tensor, init: torch.Tensor, gid: torch.Tensor,
            how: str) -> torch.Tensor:
    """Per-component min or max of `v`, read back at every pixel of the component."""
    v = torch.where(keep, v, init)  # pixels off the mask must not widen a box
    return init.scatter_reduce(0, gid, v, how).gather(0, gid)


def _paint_boxes(on: torch.Tensor, y0: torch.Tensor, x0: torch.Tensor, y1: torch.Tensor,
                 x1: torch.Tensor) -> torch.Tensor:
    n, h, w = on.shape
    wp = w + 1
    weight = on.reshape(n, -1).to(torch.int64)
    diff = torch.zeros([n, (h + 1) * wp], dtype=torch.int64, device=on.device)
    for ys, xs, sign in ((y0, x0, 1), (y0, x1 + 1, -1), (y1 + 1, x0, -1), (y1 + 1, x1 + 1, 1)):
        idx = (ys * wp + xs).reshape(n, -1) * weight  # pixels outside regions add 0 at index 0
        diff = diff.scatter_add(1, idx, weight * sign)
    cover = diff.reshape(n, h + 1, wp).cumsum(1).cumsum(2)
    return cover[:, :h, :w] > 0


class Obfuscation(nn.Module):
    """Black out or blur the body or face region found by `masker`, as a box or a pixel mask.

    `masker` maps video [B, 3, T, H, W] to masks [B, 2, T, H, W] in {0, 1} (person, face): the
    pa-synth segmenter (tensor-only, exportable) or a numpy detector on real video.
    `frame_size` fixes the blur kernel and the box propagation steps at build time (pa-synth
    presets have one frame size), so torch.export sees no shape-dependent Python; without it
    both follow each input's size.
    """

    def __init__(self, masker: nn.Module, target: str, shape: str, op: str,
                 kernel: int = 0, sigma: float = 0.0, frame_size: int | None = None) -> None:
        super().__init__()
        self.masker = masker
        self.channel = _TARGET_CHANNEL[target]
        self.box = shape == "box"
        self.blur = op == "blur"
        self.kernel = kernel
        self.sigma = sigma
        self.frame_size = frame_size
        self.rounds = BOX_ROUNDS

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, t, h, w = x.shape
        masks = self.masker(x)
        region = masks[:, self.channel].reshape(b * t, 1, h, w)
        size = self.frame_size
        if self.box:
            region = box_hull(region, h + w, early_exit=True) if size is None else box_hull(
                region, self.rounds)
        frames = x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w)
        if self.blur:
            k, s = scaled_blur(self.kernel, self.sigma, min(h, w) if size is None else size)
            fill = TF.gaussian_blur(frames, [k, k], [s, s])
        else:
            fill = torch.zeros_like(frames)
        out = torch.where(region > 0.5, fill, frames)
        return out.reshape(b, t, c, h, w).permute(0, 2, 1, 3, 4).contiguous()


def _frame_size(ctx: BuildContext) -> int | None:
    return get_preset(ctx.preset).size if ctx.benchmark == "pa-synth" else None


def build_masker(ctx: BuildContext) -> nn.Module:
    """pa-synth: the cached in-repo segmenter; real video: torchvision if weights, else OpenCV."""
    if ctx.benchmark == "pa-synth":
        return SegmenterMasker(load_segmenter(ctx.preset, ctx.cache_dir, ctx.data_version))
    from pabench.anonymizers.detectors import DetectorMasker, OpenCVDetector, TorchvisionDetector

    if ctx.detector_weights is not None:
        return DetectorMasker(TorchvisionDetector(ctx.detector_weights))
    return DetectorMasker(OpenCVDetector())


def is_tensor_only(module: nn.Module) -> bool:
    """False when some part runs outside torch (a numpy/OpenCV detector), so no export."""
    return all(getattr(m, "tensor_only", True) for m in module.modules())


def _register() -> None:
    for f in DOWNSAMPLE_FACTORS:
        ANONYMIZERS.add(f"downsample-{f}x", AnonymizerSpec(
            f"downsample-{f}x",
            f"Each frame at 1/{f} resolution (area average over {f}x{f}, nearest upsampling "
            "back to the input size)",
            lambda ctx, f=f: Downsample(f), "downsample",
            params={"factor": f, "downsample": "area", "upsample": "nearest"},
        ))
    region = {"box": "bounding box", "seg": "segmentation mask"}
    for shape in ("box", "seg"):
        for op, strengths in (("black", (None,)), ("blur", tuple(BLURS))):
            for target in ("face", "body"):
                for strength in strengths:
                    name = "-".join(p for p in (shape, op, target, strength) if p)
                    kernel, sigma = BLURS[strength] if strength else (0, 0.0)
                    what = (f"{strength} Gaussian blur (kernel {kernel}, sigma {sigma:g} at "
                            f"{REFERENCE_SIZE} px, scaled by min(H, W)/{REFERENCE_SIZE})"
                            if strength else "Blackening (set to 0)")
                    params: dict = {"shape": shape, "op": op, "target": target, "dilate_px": 1,
                                    "detector": "pa-synth: in-repo segmenter; real video: "
                                                "OpenCV HOG+Haar, or torchvision with weights"}
                    if strength:
                        params |= {"kernel": kernel, "sigma": sigma,
                                   "reference_size": REFERENCE_SIZE, "padding": "reflect",
                                   "scaling": "kernel, sigma x min(H, W)/112; kernel odd, >= 3"}
                    ANONYMIZERS.add(name, AnonymizerSpec(
                        name, f"{what} of each {target}'s {region[shape]}, per frame",
                        lambda ctx, a=(target, shape, op, kernel, sigma): Obfuscation(
                            build_masker(ctx), *a, frame_size=_frame_size(ctx)),
                        "obfuscation", params=params,
                    ))


_register()


def baseline_names() -> list[str]:
    """Every registered baseline, by family (identity first; the learned ones train on first
    use and are cached), whatever order their modules were imported in."""
    return sorted(ANONYMIZERS.names(), key=lambda n: FAMILIES.index(ANONYMIZERS.get(n).family))


def expand_names(spec: str) -> list[str]:
    """'all' -> every baseline (identity first); 'a,b' -> validated names, in the given order."""
    if spec == "all":
        return baseline_names()
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if not names:
        raise PabenchError("no baseline name given: pass a name or 'all'")
    valid = baseline_names()
    for name in names:
        if name not in valid:
            raise unknown_name("baseline", name, [*valid, "all"])
    return names


def build_baseline(name: str, ctx: BuildContext) -> nn.Module:
    spec = ANONYMIZERS.get(expand_names(name)[0])
    return spec.build(ctx).eval()


def export_baseline(name: str, out: Path, *, ctx: BuildContext,
                    fmt: str = "torch.export") -> Path:
    """Write a baseline as a submission file (segmenter included) at the clip shape of the
    pa-synth preset `ctx.preset`. Built on `ctx.device` (a learned baseline may train first),
    exported from the CPU."""
    spec = ANONYMIZERS.get(expand_names(name)[0])
    preset = get_preset(ctx.preset)
    fmt = check_format(fmt)
    check_device(ctx.device)
    module = spec.build(ctx).eval()
    if not is_tensor_only(module):
        raise PabenchError(
            f"baseline '{name}' on {ctx.benchmark} uses a numpy/OpenCV detector frame by frame, "
            "so it is not a tensor-only module and cannot be exported; evaluate it in process "
            f"with `pabench evaluate baseline:{name}` instead")
    return export_submission(module.cpu(), out, frames=preset.frames, size=preset.size, fmt=fmt)
