"""The typed result record: one JSON per (submission, protocol), validated, written atomically.

`schema` holds the versioned models and their upgrades, `files` the strict reading and atomic
writing of record files and the raw references they share (`references/<sha256>.json`).
"""

from pabench.records.files import (
    MAX_RECORD_BYTES,
    REFERENCES,
    check_replace,
    parse_record,
    read_record,
    stored,
    write_record,
)
from pabench.records.schema import (
    SCHEMA_VERSION,
    AttackerResult,
    BenchmarkRef,
    Consistency,
    Curve,
    Metrics,
    ProtocolRef,
    Record,
    RecordMeta,
    Reference,
    Replica,
    SubmissionInfo,
    ValidationSummary,
)

__all__ = [
    "MAX_RECORD_BYTES", "REFERENCES", "SCHEMA_VERSION", "AttackerResult", "BenchmarkRef",
    "Consistency", "Curve", "Metrics", "ProtocolRef", "Record", "RecordMeta", "Reference",
    "Replica", "SubmissionInfo", "ValidationSummary", "check_replace", "parse_record",
    "read_record", "stored", "write_record",
]
