"""`pabench leaderboard build|serve|import-reported`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

app = typer.Typer(help="Build and serve the static leaderboard site.", no_args_is_help=True)
console = Console()


@app.command()
def build(
    results: Annotated[Path, typer.Option(help="Folder of result records")] = Path(
        "leaderboard/results"
    ),
    reported: Annotated[Path, typer.Option(help="Vendored paper results")] = Path(
        "leaderboard/reported"
    ),
    out: Annotated[Path, typer.Option(help="Output folder (rebuilt from scratch)")] = Path("site"),
) -> None:
    """Render the static site: tables, trade-off plots, entry, protocol and reported pages."""
    from pabench.leaderboard import build_site

    s = build_site(results, reported, out)
    console.print(
        f"built {s.out}/index.html: {s.tables} tables, {s.entries} entries, "
        f"{s.reported_groups} reported tables"
    )


@app.command()
def serve(
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1")] = 8000,
    site: Annotated[Path, typer.Option(help="Folder built by `leaderboard build`")] = Path("site"),
) -> None:
    """Serve the built site on http://127.0.0.1:PORT until interrupted."""
    from pabench.leaderboard import make_server

    server = make_server(site, port)
    console.print(f"serving {site} on http://127.0.0.1:{server.server_port}/ (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


@app.command("import-reported")
def import_reported_(
    csv: Annotated[Path, typer.Argument(help="CSV of numbers copied from papers")],
    out: Annotated[Path, typer.Option(help="Vendor folder")] = Path("leaderboard/reported"),
    citations: Annotated[
        Path | None, typer.Option(help="JSON {source: citation} for sources pabench lacks")
    ] = None,
) -> None:
    """Validate a CSV of numbers copied from papers and vendor it with its citations."""
    from pabench.leaderboard import import_reported

    for path in import_reported(csv, out, citations):
        console.print(f"wrote {path}")
