"""The sidecar `NAME.json`: who made a submission and what it was trained on."""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, JsonValue, ValidationError

from pabench.io import read_json, validation_error


class TrainingData(BaseModel):
    """What the anonymizer was trained on: the novel protocol refuses overlapping submissions."""

    model_config = ConfigDict(extra="forbid")

    datasets: list[str] = []
    action_classes: list[str] = []
    attributes: list[str] = []
    attackers: list[str] = []  # architectures it was trained against: overlap is recorded


class SubmissionMeta(BaseModel):
    """The sidecar `NAME.json`; unknown keys are refused so typos do not pass silently."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str | None = None
    authors: list[str] = []
    paper_url: str | None = None
    licence: str | None = Field(None, validation_alias=AliasChoices("licence", "license"))
    training_data: TrainingData = TrainingData()
    # settings and seeds an in-repo training used (`pabench train-baseline`), to retrain it
    training_recipe: dict[str, JsonValue] | None = None
    # where it trained (platform, processor, device, threads): the same recipe and seed give
    # other weights elsewhere
    trained_on: dict[str, str] | None = None


def read_meta(path: Path) -> SubmissionMeta:
    """Parse a sidecar; any problem becomes one line naming the file."""
    source = f"submission meta {path}"
    data = read_json(path, source)
    try:
        return SubmissionMeta.model_validate(data)
    except ValidationError as e:
        raise validation_error(source, e) from None
