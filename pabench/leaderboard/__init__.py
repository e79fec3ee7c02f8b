"""The public leaderboard: verified records and reported paper numbers rendered to a static site."""

from pabench.leaderboard.add import Added, add_records
from pabench.leaderboard.ranking import pareto_flags
from pabench.leaderboard.reported import import_reported, load_reported
from pabench.leaderboard.site import build_site, make_server
from pabench.leaderboard.tables import build_tables, load_records

__all__ = [
    "Added", "add_records", "build_site", "build_tables", "import_reported", "load_records",
    "load_reported", "make_server", "pareto_flags",
]
