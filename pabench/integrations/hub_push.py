"""Publish a built dataset folder to the Hugging Face Hub as a dataset repository.

The repository holds what pabench's loader reads (`pabench.json`, the parquet splits and the
lossless media they list) and, made at push time so that builds and their fingerprints stay
as they are, what a browser, the Hub's viewer and `load_dataset` play: an H.264 yuv420p
preview of every clip under `previews/<split>/` (encoded once per clip and encoder, kept under
$PABENCH_HOME/cache/previews), beside a `metadata.parquet` (VideoFolder layout: the `video`
column is a `datasets.Video`, yes/no privacy attributes are `ClassLabel(["no", "yes"])`), and a
dataset card (huggingface_hub's `DatasetCard`) whose config is those previews. `fiftyone=True`
adds the files `fiftyone.utils.huggingface.load_from_hub` reads: `fiftyone.yml` and a FiftyOne
dataset (`metadata.json`, `samples.json`, `frames/` with per-frame labels and pa-synth's
person/face masks) over the same previews.

The push is one commit with `upload_folder` semantics: files of the repository (or branch) that
this push does not write are deleted, and `private=True` makes an existing repository private.
The folder must be exactly what the build wrote: every split must match its fingerprint in
`pabench.json` (so a half-built or edited folder is refused) and no file may be a link or lie
outside the folder (so a planted link cannot upload a file from elsewhere). The token comes from
huggingface_hub's usual sources (HF_TOKEN, `hf auth login`).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

import av
import datasets
import numpy as np
import pyarrow.parquet as pq
import yaml
from huggingface_hub import (
    CommitOperationAdd,
    CommitOperationDelete,
    DatasetCard,
    DatasetCardData,
    HfApi,
)
from huggingface_hub.errors import HFValidationError, HTTPError  # HTTPError: transport too
from huggingface_hub.utils import validate_repo_id

from pabench.data.hub import META_FILE, DatasetMeta, decode_video, read_meta, split_fingerprint
from pabench.errors import PabenchError
from pabench.integrations.fiftyone_view import (
    fiftyone_sample,
    import_fiftyone,
    media_member,
    row_masks,
    sample_labels,
)
from pabench.integrations.previews import PREVIEW_MIN_SIDE, PREVIEW_OPTIONS, encode_preview
from pabench.io import Progress, atomic_write, pabench_home

PREVIEWS = "previews"
YES_NO = datasets.ClassLabel(names=["no", "yes"])
# build-only columns: the master's path and bytes (in data/<split>.parquet), the masks' files
_NOT_IN_PREVIEWS = ("video", "video_bytes", "masks")
_SIZES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
          (1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M"))


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0][:300] if lines else type(e).__name__


def files_to_push(folder: Path) -> list[str]:
    """Paths (relative, POSIX) of every file of the build a push uploads, sorted; refuses a
    folder that is not exactly a finished build."""
    folder = Path(folder)
    meta = read_meta(folder)  # refuses folders that are not a build at all
    root = folder.resolve()
    candidates = [folder / "README.md", folder / META_FILE]
    for split in meta.splits:
        parquet = folder / "data" / f"{split}.parquet"
        if not parquet.is_file():
            raise PabenchError(f"{folder}: {META_FILE} lists split '{split}' but "
                               f"{parquet.relative_to(folder)} is missing; rebuild the dataset")
        candidates += [parquet, *sorted((folder / "videos" / split).glob("**/*"))]
    found = []
    for path in candidates:
        if path.is_symlink() or not path.resolve().is_relative_to(root):
            raise PabenchError(f"{path}: refusing to push a link or a file outside {folder}")
        if path.is_file():
            found.append(path.relative_to(folder).as_posix())
    if "README.md" not in found:
        raise PabenchError(f"{folder}: no README.md dataset card; rebuild the dataset")
    for split in meta.splits:
        if meta.fingerprints.get(split) != split_fingerprint(folder, split):
            raise PabenchError(f"{folder}: split '{split}' does not match its fingerprint in "
                               f"{META_FILE} (half-built or changed since the build); rebuild it")
    return sorted(found)


def preview_features(meta: DatasetMeta, features: datasets.Features) -> datasets.Features:
    """The label columns of a split's features as the previews' metadata has them: privacy
    attributes (and their per-frame labels) as ClassLabel no/yes, build-only columns dropped."""
    out = datasets.Features({"video_id": datasets.Value("string")})
    for name, feature in features.items():
        if name in _NOT_IN_PREVIEWS or name == "video_id":
            continue
        if name in meta.attributes:
            feature = YES_NO
        elif name.startswith("frames_") and name.removeprefix("frames_") in meta.attributes:
            feature = datasets.List(YES_NO, length=getattr(feature, "length", -1))
        out[name] = feature
    return out


def size_category(n: int) -> str:
    """The Hub's size bucket for `n` examples."""
    return next((label for bound, label in _SIZES if n < bound), "n>10M")


def cached_preview(video: np.ndarray, fps: float, cache: Path | None = None) -> Path:
    """The H.264 preview of `video` at `fps`, encoded once: keyed by the pixels, the frame rate
    and the encoder (PyAV, its FFmpeg libraries and the preview settings), so a re-push (a new
    card, `--private`, another branch or repository) encodes nothing again, and an upgraded
    encoder never serves an old file."""
    if cache is None:
        cache = pabench_home() / "cache" / "previews"
    key = hashlib.sha256(repr((video.shape, fps, PREVIEW_MIN_SIDE, PREVIEW_OPTIONS, av.__version__,
                               sorted(av.library_versions.items()))).encode())
    key.update(np.ascontiguousarray(video).data)
    path = cache / key.hexdigest()[:2] / f"{key.hexdigest()}.mp4"
    if not path.is_file():
        atomic_write(path, lambda tmp: encode_preview(video, fps, tmp))
    return path


def stage_hub_files(folder: Path, stage: Path, *, fiftyone: bool = False,
                    progress: Progress | None = None) -> dict[str, Path]:
    """Write the previews' metadata, the card (and with `fiftyone` FiftyOne's files) into
    `stage`; returns every file the Hub gets beside the build, repo path -> file (previews
    come from `cached_preview`). Every clip is decoded from its master."""
    folder, stage = Path(folder), Path(stage)
    meta = read_meta(folder)
    root = folder.resolve()
    fo = import_fiftyone() if fiftyone else None
    samples: list[dict] = []
    previews: dict[str, Path] = {}
    total, done = sum(meta.splits.values()), 0
    split_features: dict[str, datasets.Features] = {}
    for split in meta.splits:
        table = pq.read_table(folder / "data" / f"{split}.parquet")
        features = datasets.Features.from_arrow_schema(table.schema)
        split_features[split] = preview_features(meta, features)
        rows, seen = [], set()
        for row in table.to_pylist():
            path = media_member(root, split, row["video"], "video")
            name = Path(row["video"]).relative_to(f"videos/{split}").with_suffix(".mp4").as_posix()
            if name in seen:
                raise PabenchError(f"{folder}/data/{split}.parquet: two videos share the preview "
                                   f"name {name!r} (masters differing only in their suffix)")
            seen.add(name)
            video = decode_video(row.get("video_bytes") or path, path)
            rel = f"{PREVIEWS}/{split}/{name}"
            previews[rel] = cached_preview(video, meta.fps)
            if fo is not None:
                labels = sample_labels(meta, row, len(video),
                                       row_masks(root, split, row, len(video)))
                sample = fiftyone_sample(fo, video, previews[rel], meta.fps, split, labels)
                samples.append(_sample_json(sample, stage, rel))
            rows.append({"file_name": name, **{k: row[k] for k in split_features[split]}})
            done += 1
            if progress:
                progress(f"{meta.name}: previews", done, total)
        if not rows:  # VideoFolder has nothing to read in an empty split: it is left out
            continue
        metadata = datasets.Features({"file_name": datasets.Value("string"),
                                      **split_features[split]})
        columns = {k: [r[k] for r in rows] for k in metadata}
        table = datasets.Dataset.from_dict(columns, features=metadata).data.table
        (stage / PREVIEWS / split).mkdir(parents=True, exist_ok=True)
        pq.write_table(table, stage / PREVIEWS / split / "metadata.parquet")
    playable = [s for s, n in meta.splits.items() if n]
    card = hub_card(folder, meta, split_features[next(iter(meta.splits))], playable)
    card.save(str(stage / "README.md"))
    if fo is not None:
        _write_fiftyone(stage, meta, card, samples)
    staged = {p.relative_to(stage).as_posix(): p for p in stage.rglob("*") if p.is_file()}
    return dict(sorted({**staged, **previews}.items()))


def _sample_json(sample, stage: Path, filepath: str) -> dict:
    """A sample as FiftyOne's JSON dataset format stores it: the preview's repo path, the frame
    labels in their own file (what `LegacyFiftyOneDatasetImporter` reads)."""
    frames = Path("frames") / Path(filepath).relative_to(PREVIEWS).with_suffix(".json")
    (stage / frames).parent.mkdir(parents=True, exist_ok=True)
    (stage / frames).write_text(json.dumps(
        {"frames": {str(n): frame.to_dict() for n, frame in sample.frames.items()}}))
    return {**sample.to_dict(), "filepath": filepath, "frames": frames.as_posix()}


def _write_fiftyone(stage: Path, meta: DatasetMeta, card: DatasetCard,
                    samples: list[dict]) -> None:
    """`fiftyone.yml` (the config `load_from_hub` looks for) and the dataset it points at."""
    config = {"name": meta.name, "format": "FiftyOneDataset", "tags": card.data.tags,
              "license": card.data.license, "description": card.data.pretty_name}
    (stage / "fiftyone.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    (stage / "metadata.json").write_text(json.dumps({"name": meta.name, "media_type": "video"}))
    (stage / "samples.json").write_text(json.dumps({"samples": samples}))


def hub_card(folder: Path, meta: DatasetMeta, labels: datasets.Features,
             playable: list[str]) -> DatasetCard:
    """The build's card with the Hub's metadata: task, size, annotation source and one config,
    the `playable` splits' previews as `datasets.Video` (`datasets` reads every config of a repo
    with one builder, so pabench's parquet is no second config); prose and citation kept."""
    build = DatasetCard.load(Path(folder) / "README.md")
    video = datasets.Features({"video": datasets.Video(), **labels})
    data = DatasetCardData(
        pretty_name=build.data.get("pretty_name", meta.name),
        license=build.data.get("license"),
        task_categories=["video-classification"],
        size_categories=[size_category(sum(meta.splits.values()))],
        annotations_creators=["machine-generated" if meta.source.get("generator")
                              else "expert-generated"],
        tags=build.data.get("tags", []),
        configs=[{"config_name": "default", "data_files": [
            {"split": s, "path": f"{PREVIEWS}/{s}/*"} for s in playable]}],
        dataset_info=datasets.DatasetInfo(features=video)._to_yaml_dict(),
    )
    files = (
        "\n## Files\n\n"
        f"- `{PREVIEWS}/<split>/`: H.264 yuv420p previews that browsers, the Hub's viewer and "
        "FiftyOne play, with `metadata.parquet` (the default config: `video` is a "
        "`datasets.Video`, privacy attributes are no/yes class labels).\n"
        "- `data/<split>.parquet`, `videos/<split>/`, `pabench.json`: the lossless masters "
        "(RGB H.264, exact pixels) and their labels, which `pabench evaluate` reads.\n"
    )
    return DatasetCard(f"---\n{data.to_yaml()}\n---\n{build.text.rstrip()}\n{files}")


def push_dataset(folder: Path, repo_id: str, *, private: bool = False,
                 revision: str | None = None, fiftyone: bool = False,
                 progress: Progress | None = None) -> tuple[str, int]:
    """Create (or reuse) the dataset repo and make it hold exactly this push's files, in one
    commit; returns the commit URL and the number of files pushed."""
    folder = Path(folder)
    try:
        validate_repo_id(repo_id)
    except HFValidationError as e:
        raise PabenchError(f"--repo-id {repo_id!r} is not a Hub repository id, ORG/NAME "
                           f"({_first_line(e)})") from None
    files = {rel: folder / rel for rel in files_to_push(folder) if rel != "README.md"}
    name = read_meta(folder).name
    with tempfile.TemporaryDirectory(prefix="pabench-push-") as tmp:
        files |= stage_hub_files(folder, Path(tmp), fiftyone=fiftyone, progress=progress)
        return _commit(repo_id, files, private=private, revision=revision,
                       message=f"pabench: upload {name} ({len(files)} files)"), len(files)


def _commit(repo_id: str, files: dict[str, Path], *, private: bool, revision: str | None,
            message: str) -> str:
    api = HfApi()
    try:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        if private:  # create_repo leaves an existing repository's visibility as it was
            api.update_repo_settings(repo_id, repo_type="dataset", private=True)
        if revision:
            api.create_branch(repo_id, repo_type="dataset", branch=revision, exist_ok=True)
        stale = [rel for rel in api.list_repo_files(repo_id, repo_type="dataset",
                                                    revision=revision)
                 if rel not in files and rel != ".gitattributes"]
        operations = [
            *(CommitOperationDelete(path_in_repo=rel) for rel in stale),
            *(CommitOperationAdd(path_in_repo=rel, path_or_fileobj=str(path))
              for rel, path in sorted(files.items())),
        ]
        info = api.create_commit(repo_id, operations, repo_type="dataset", revision=revision,
                                 commit_message=message)
    except UnicodeEncodeError:  # HTTP headers are ASCII: the token is the header users type
        raise PabenchError(f"push to {repo_id} failed: the Hub token (HF_TOKEN or `hf auth "
                           "login`) is not ASCII; is it mistyped?") from None
    except (HTTPError, OSError, ValueError) as e:
        status = getattr(getattr(e, "response", None), "status_code", None)
        hint = " (check the Hub token: HF_TOKEN or `hf auth login`)" if status in (401, 403) \
            else ""
        raise PabenchError(f"push to {repo_id} failed: {_first_line(e)}{hint}") from None
    return info.commit_url
