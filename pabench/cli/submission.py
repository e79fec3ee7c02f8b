"""`pabench submission pack`: a submission, its sidecar and its record, packed for review."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from pabench.cli.console import cell, out

app = typer.Typer(help="Prepare a submission for the official leaderboard.",
                  no_args_is_help=True)


@app.callback()
def _group() -> None:
    """Prepare a submission for the official leaderboard (docs/submitting.md)."""


@app.command()
def pack(
    file: Annotated[Path, typer.Argument(help="The submission (.pt2 or TorchScript)")],
    record: Annotated[Path, typer.Option(help="Your record of FILE on the public test seed, "
                                         "written by `pabench evaluate`")],
    out_: Annotated[Path, typer.Option("--out", help="A new folder, or a .zip")],
    meta: Annotated[Path | None, typer.Option(help="Sidecar JSON (default: NAME.json)")] = None,
    replica: Annotated[list[Path] | None, typer.Option(
        help="Replicas the record scored, in its order (repeat)")] = None,
) -> None:
    """Pack FILE, its sidecar, your record and your environment, with a manifest of their
    sha256, for the maintainers to verify on the private test seed.

    Examples:

      pabench submission pack my.pt2 --record runs/pa-synth__standard__known__v6__my.json
      --out submissions/my
    """
    from pabench.cli.usage import checking_arguments
    from pabench.review.pack import pack_submission

    with checking_arguments():
        for path in (file, record, *(replica or []), *([meta] if meta else [])):
            if not path.is_file():
                raise typer.BadParameter(f"{path}: file not found")
    written = pack_submission(file, record, out_, meta=meta, replicas=replica)
    out.print(Text.assemble("packed ", cell(written), ": open a pull request adding it under "
                            "submissions/ (docs/submitting.md#getting-an-official-row)"),
              soft_wrap=True)
