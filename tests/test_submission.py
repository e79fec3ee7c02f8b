"""The submission door: format sniffing, refusal of pickles and bad files, and every check."""

from __future__ import annotations

import io
import json
import os
import pickle
import shutil
import zipfile
from pathlib import Path

import pytest
import torch
from hostile import Marker, SmallConv

from pabench.anonymizers import Identity, reserved_names
from pabench.errors import PabenchError
from pabench.submission import (
    DEFAULT_BUDGETS,
    Budgets,
    export_submission,
    from_module,
    load_submission,
    validate,
)


class Nan(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * float("nan")


class WrongShape(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, :, ::2]


class OutOfRange(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2.0


class Noisy(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x + 0.01 * torch.rand_like(x)).clamp(0, 1)


class BatchMean(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - x.mean(dim=0, keepdim=True) + 0.5).clamp(0, 1)


@pytest.fixture(scope="module")
def conv_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("conv")
    torch.manual_seed(0)
    module = SmallConv()
    return {
        fmt: export_submission(module, out / f"conv-{fmt}.pt2", frames=4, size=16, fmt=fmt)
        for fmt in ("torch.export", "torchscript")
    }


@pytest.mark.parametrize("fmt", ["torch.export", "torchscript"])
def test_conv_loads_and_runs_at_another_size(conv_files: dict[str, Path], fmt: str) -> None:
    sub = load_submission(conv_files[fmt])
    assert sub.format == fmt and sub.name == f"conv-{fmt}" and len(sub.sha256) == 64
    y = sub.module(torch.rand(3, 3, 6, 24, 40))
    assert y.shape == (3, 3, 6, 24, 40)
    report = validate(sub, frames=8, size=32)
    assert report.params == 246
    assert report.flops is not None and report.flops > 0
    assert report.peak_memory_mb is not None and report.peak_memory_mb > 0
    assert {"shape", "finite", "range", "deterministic", "batch_independent"} <= set(report.checks)


def test_identity_export_at_another_size(tmp_path: Path) -> None:
    sub = load_submission(export_submission(Identity(), tmp_path / "id.pt2", frames=4, size=16))
    x = torch.rand(1, 3, 5, 48, 64)
    assert torch.equal(sub.module(x), x)
    assert validate(sub, frames=8, size=24).flops == 0


def test_extension_lies(conv_files: dict[str, Path], tmp_path: Path) -> None:
    ts_as_pt2 = shutil.copy(conv_files["torchscript"], tmp_path / "model.pt2")
    pt2_as_pt = shutil.copy(conv_files["torch.export"], tmp_path / "model.pt")
    assert load_submission(Path(ts_as_pt2)).format == "torchscript"
    assert load_submission(Path(pt2_as_pt)).format == "torch.export"


def test_static_export_refused_with_both_specs(tmp_path: Path) -> None:
    path = tmp_path / "static.pt2"
    torch.export.save(torch.export.export(SmallConv(), (torch.rand(2, 3, 4, 16, 16),)), path)
    sub = load_submission(path)
    with pytest.raises(PabenchError) as err:
        validate(sub, frames=8, size=32)
    msg = str(err.value)
    assert "\n" not in msg and "input_spec" in msg
    assert "[2, 3, 4, 16, 16]" in msg and "[2, 3, 8, 32, 32]" in msg and "dynamic_shapes" in msg


def test_torch_save_and_pickles_refused_without_unpickling(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    saved = tmp_path / "saved.pt2"
    torch.save({"model": SmallConv(), "evil": Marker(marker)}, saved)
    raw = tmp_path / "raw.pt2"
    raw.write_bytes(pickle.dumps(Marker(marker)))
    for path in (saved, raw):
        with pytest.raises(PabenchError, match="torch.export") as err:
            load_submission(path)
        assert str(path) in str(err.value) and "\n" not in str(err.value)
    assert not marker.exists()


def test_pickled_payload_inside_pt2_refused(conv_files: dict[str, Path], tmp_path: Path) -> None:
    """A .pt2 whose weight config asks for pickle loading must be refused before torch sees it."""
    src = zipfile.ZipFile(conv_files["torch.export"])
    evil = tmp_path / "evil.pt2"
    with zipfile.ZipFile(evil, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith("_weights_config.json"):
                cfg = json.loads(data)
                for payload in cfg["config"].values():
                    payload["use_pickle"] = True
                data = json.dumps(cfg).encode()
            dst.writestr(info.filename, data)
    with pytest.raises(PabenchError, match="pickled object"):
        load_submission(evil)


def test_file_level_errors(conv_files: dict[str, Path], tmp_path: Path) -> None:
    truncated = tmp_path / "cut.pt2"
    truncated.write_bytes(conv_files["torch.export"].read_bytes()[:300])
    text = tmp_path / "notes.pt2"
    text.write_text("not a model")
    other = tmp_path / "other.pt2"
    with zipfile.ZipFile(other, "w") as zf:
        zf.writestr("x/readme.txt", "hi")
    for path, words in [(tmp_path / "missing.pt2", "not found"), (truncated, "zip"),
                        (text, "zip"), (other, "unknown archive")]:
        with pytest.raises(PabenchError, match=words) as err:
            load_submission(path)
        assert str(path) in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(("module", "check"), [
    (Nan(), "finite"), (WrongShape(), "shape"), (OutOfRange(), "range"),
    (Noisy(), "deterministic"), (BatchMean(), "batch_independent"),
])
def test_bad_models_refused_with_check_named(module: torch.nn.Module, check: str) -> None:
    with pytest.raises(PabenchError, match=f"check '{check}'") as err:
        validate(from_module("bad", module), frames=4, size=16)
    assert "\n" not in str(err.value) and "[2, 3, 4, 16, 16]" in str(err.value)


def test_range_tolerance_and_time_budget() -> None:
    slightly = from_module("slightly", OutOfRange())
    with pytest.raises(PabenchError, match="check 'time_budget'"):
        validate(from_module("conv", SmallConv()), frames=4, size=16,
                 budgets=Budgets(max_seconds_per_clip=0.0))
    with pytest.raises(PabenchError, match="check 'range'"):
        validate(slightly, frames=4, size=16, budgets=Budgets(range_tolerance=0.5))
    assert "range" in validate(slightly, frames=4, size=16,
                               budgets=Budgets(range_tolerance=1.5)).checks


def test_from_module_hash_stable_and_weight_sensitive() -> None:
    torch.manual_seed(0)
    a = SmallConv()
    b = SmallConv()
    b.load_state_dict(a.state_dict())
    assert from_module("a", a).sha256 == from_module("a", b).sha256
    assert from_module("a", a).sha256 != from_module("b", a).sha256  # the name is part of it
    with torch.no_grad():
        b.conv.bias += 1
    assert from_module("a", a).sha256 != from_module("a", b).sha256
    assert from_module("a", a).format == "baseline"


def test_sidecar_meta(conv_files: dict[str, Path], tmp_path: Path) -> None:
    path = Path(shutil.copy(conv_files["torch.export"], tmp_path / "blur.pt2"))
    meta = {"name": "Blur", "authors": ["A. B."], "licence": "MIT",
            "training_data": {"datasets": ["ucf101"], "action_classes": ["run"]}}
    path.with_suffix(".json").write_text(json.dumps(meta))
    sub = load_submission(path)
    assert sub.name == "Blur" and sub.meta.training_data.datasets == ["ucf101"]
    bad = tmp_path / "bad.json"
    for text in ("{not json", json.dumps({"authors": "A. B."}), json.dumps({"licnse": "MIT"})):
        bad.write_text(text)
        with pytest.raises(PabenchError) as err:
            load_submission(path, meta_path=bad)
        assert str(bad) in str(err.value) and "\n" not in str(err.value)


def test_state_dict_only_zip_is_not_torchscript(tmp_path: Path) -> None:
    buf = io.BytesIO()
    torch.save(SmallConv().state_dict(), buf)
    path = tmp_path / "weights.ts"
    path.write_bytes(buf.getvalue())
    with pytest.raises(PabenchError, match="torch.save pickle"):
        load_submission(path)


def test_code_in_shape_expression_refused(conv_files: dict[str, Path], tmp_path: Path) -> None:
    """The deserializer eval()s shape expressions; one that is more than sympy is refused."""
    marker = tmp_path / "pwned"
    src = zipfile.ZipFile(conv_files["torch.export"])
    evil = tmp_path / "evil.pt2"
    payload = f"__import__('os').mkdir('{marker}') or Symbol("
    with zipfile.ZipFile(evil, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if "/models/" in info.filename:
                data = data.replace(b'"expr_str": "Symbol(', f'"expr_str": "{payload}'.encode())
            dst.writestr(info.filename, data)
    with pytest.raises(PabenchError, match="refused shape expression"):
        load_submission(evil)
    assert not marker.exists()


@pytest.mark.parametrize("name", [
    "identity", "Downsample-4X", "spact", "a b", "i\u200bdentity", "../x", "x" * 65, "[/]", "",
])
def test_hostile_sidecar_names_refused_in_one_line(conv_files: dict[str, Path], tmp_path: Path,
                                                   name: str) -> None:
    """Names key records and leaderboard rows: no look-alikes, paths, markup or baseline names."""
    path = Path(shutil.copy(conv_files["torch.export"], tmp_path / "mine.pt2"))
    sidecar = path.with_suffix(".json")
    sidecar.write_text(json.dumps({"name": name}))
    with pytest.raises(PabenchError) as err:
        load_submission(path, reserved=reserved_names())
    msg = str(err.value)
    assert str(sidecar) in msg and "\n" not in msg and "name" in msg
    if name.lower() in ("identity", "downsample-4x", "spact"):
        assert "reserved" in msg and '"name"' in msg


def test_file_stem_may_not_be_a_baseline_name(conv_files: dict[str, Path],
                                              tmp_path: Path) -> None:
    path = Path(shutil.copy(conv_files["torchscript"], tmp_path / "box-black-face.pt2"))
    with pytest.raises(PabenchError, match="reserved for the in-repo baseline") as err:
        load_submission(path, reserved=reserved_names())
    assert str(path) in str(err.value)
    path.with_suffix(".json").write_text(json.dumps({"name": "my-box-black-face_v1.2"}))
    assert load_submission(path, reserved=reserved_names()).name == "my-box-black-face_v1.2"


def test_validation_report_carries_the_measurements() -> None:
    report = validate(from_module("conv", SmallConv()), frames=4, size=16)
    assert report.checks == ["shape", "dtype", "finite", "range", "deterministic",
                             "batch_independent", "time_budget", "memory_budget"]
    assert 0 < report.seconds_per_clip < DEFAULT_BUDGETS.max_seconds_per_clip
    # one clip [1, 3, 4, 16, 16] float32 is 12 KiB; the conv's output and sigmoid make two
    assert report.peak_memory_mb is not None and 0.02 <= report.peak_memory_mb < 1
    assert report.params == 246 and report.flops is not None and report.flops > 0


def test_export_is_atomic_and_independent_of_the_path(tmp_path: Path) -> None:
    a = export_submission(SmallConv().eval(), tmp_path / "a.pt2", frames=4, size=16)
    torch.manual_seed(0)
    module = SmallConv()
    first = export_submission(module, tmp_path / "one.pt2", frames=4, size=16)
    second = export_submission(module, tmp_path / "sub" / "two.pt2", frames=4, size=16)
    assert first.read_bytes() == second.read_bytes() != a.read_bytes()
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a.pt2", "one.pt2", "sub", "two.pt2"]
    with pytest.raises(PabenchError, match="unknown export format 'onnx'"):
        export_submission(module, tmp_path / "x.pt2", frames=4, size=16, fmt="onnx")  # type: ignore[arg-type]
    assert not (tmp_path / "x.pt2").exists()


class NoisyOnRealContent(torch.nn.Module):
    """Deterministic on the random probe, random on 8-bit video content (values k/255)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        quantised = ((x * 255).round() - x * 255).abs().amax() < 1e-4
        return (x + 0.1 * torch.rand_like(x) * quantised).clamp(0, 1)


def test_determinism_is_also_checked_on_benchmark_clips():
    from pabench.submission import from_module, validate

    sub = from_module("noisy", NoisyOnRealContent())
    validate(sub, frames=4, size=16)  # the random probe alone cannot see it
    clips = torch.randint(0, 256, (2, 3, 4, 16, 16)).float() / 255
    with pytest.raises(PabenchError, match="deterministic_on_benchmark_clips"):
        validate(sub, frames=4, size=16, clips=clips)
    report = validate(from_module("ident", Identity()), frames=4, size=16, clips=clips)
    assert "batch_independent_on_benchmark_clips" in report.checks


class SeesPrecision(torch.nn.Module):
    """Identity that records the float32 precision its convolutions and matmuls would get."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[tuple[str, str]] = set()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen.add((torch.backends.cudnn.conv.fp32_precision,
                       torch.backends.cuda.matmul.fp32_precision))
        return x


def test_anonymizers_run_without_tf32_and_the_setting_is_restored() -> None:
    """A TF32 convolution made a segmenter's mask differ between a clip alone and in its batch
    on an H200, so validation and anonymization run the anonymizer in IEEE float32."""
    conv, matmul = torch.backends.cudnn.conv, torch.backends.cuda.matmul
    saved = conv.fp32_precision, matmul.fp32_precision
    conv.fp32_precision = matmul.fp32_precision = "tf32"
    try:
        module = SeesPrecision()
        validate(from_module("sees", module), frames=4, size=16)
        assert module.seen == {("ieee", "ieee")}
        assert (conv.fp32_precision, matmul.fp32_precision) == ("tf32", "tf32")
    finally:
        conv.fp32_precision, matmul.fp32_precision = saved


class Mul16(torch.nn.Module):
    """Multiplies by a 16x16-pooled copy of itself: torch.export cannot keep H/W 8..8192 and
    infers a minimum of 16, yet only multiples of 16 pass the program's guards."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = torch.nn.functional.avg_pool3d(x, (1, 16, 16))
        return x * torch.nn.functional.interpolate(pooled, scale_factor=(1, 16, 16))


class DataDependent(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x if x.mean() > 0.5 else 1 - x


def test_export_says_what_it_wrote(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger="pabench"):
        export_submission(Identity(), tmp_path / "id.pt2", frames=4, size=16)
    [note] = [r for r in caplog.records if r.name == "pabench.submission.export"]
    assert note.levelname == "INFO" and note.getMessage() == (
        f"exported {tmp_path / 'id.pt2'}: input [1..1024, 3, 1..4096, 8..8192, 8..8192]; runs "
        "at frames 4, 8, 16; height/width 16, 24, 32, 40, 64, 112")


def test_export_warns_when_the_named_ranges_fail_and_validate_refuses_a_failing_size(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The spec claims [16..inf] for H/W; the probes and `validate` show 24 and 40 fail."""
    with caplog.at_level("INFO", logger="pabench"):
        path = export_submission(Mul16(), tmp_path / "mul16.pt2", frames=4, size=32)
    [note] = [r for r in caplog.records if r.name == "pabench.submission.export"]
    msg = note.getMessage()
    assert note.levelname == "WARNING" and "the module constrains height, width" in msg
    assert "input [2..inf, 3, 2..inf, 16..inf, 16..inf]" in msg
    assert msg.endswith("height/width 32, 64, 112 (fails at 16, 24, 40)")
    sub = load_submission(path)
    assert str(sub.input_spec) == "[2..inf, 3, 2..inf, 16..inf, 16..inf]"
    assert "input_spec" in validate(sub, frames=4, size=64).checks
    with pytest.raises(PabenchError, match=r"Guard failed.*check 'input_spec'"):
        validate(sub, frames=4, size=24)


def test_a_module_that_cannot_be_exported_is_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(PabenchError) as err:
        export_submission(DataDependent(), tmp_path / "dd.pt2", frames=4, size=16)
    msg = str(err.value)
    assert "\n" not in msg and "dd.pt2: cannot be exported with dynamic batch" in msg
    assert "draft_export" in msg and not (tmp_path / "dd.pt2").exists()


def test_probing_leaves_the_global_rng_alone() -> None:
    from pabench.submission import probe

    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    probed = probe(Noisy(), frames=4, size=16)
    assert probed.all_run and torch.equal(torch.rand(3), expected)


def test_exported_files_are_world_readable(tmp_path: Path) -> None:
    """Like any file a user writes (0666 less the umask), not a temp file's 0600."""
    old = os.umask(0o022)
    try:
        path = export_submission(Identity(), tmp_path / "id.pt2", frames=4, size=16)
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644
