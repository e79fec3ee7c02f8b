"""The path from a researcher's file to an official row: the pack a submitter hands in
(`pack`) and the maintainer's re-run on the private test seed that turns it into an official
record (`verify`). Above the evaluation and the leaderboard, which it uses."""
