"""The typed result record: one JSON per (submission, protocol), validated, written atomically.

`schema` holds the versioned models and their upgrades, `files` the strict reading and atomic
writing of record files and the raw references they share (`references/<sha256>.json`),
`integrity` the checks of a record's numbers against each other, of its outcomes file
(`outcomes`: per-video results for paired comparisons) and of an official record against its
verification digest.
"""

from pabench.records.files import (
    MAX_RECORD_BYTES,
    REFERENCES,
    as_stored,
    check_replace,
    parse_record,
    read_record,
    stored,
    write_record,
)
from pabench.records.integrity import check_outcomes, check_record, record_digest
from pabench.records.schema import (
    SCHEMA_VERSION,
    AttackerResult,
    BenchmarkRef,
    Consistency,
    Curve,
    Metrics,
    Paired,
    ProtocolRef,
    Record,
    RecordMeta,
    Reference,
    Replica,
    SubmissionInfo,
    ValidationSummary,
    Verification,
)

__all__ = [
    "MAX_RECORD_BYTES", "REFERENCES", "SCHEMA_VERSION", "AttackerResult", "BenchmarkRef",
    "Consistency", "Curve", "Metrics", "Paired", "ProtocolRef", "Record", "RecordMeta",
    "Reference", "Replica", "SubmissionInfo", "ValidationSummary", "Verification", "as_stored",
    "check_outcomes", "check_record", "check_replace", "parse_record", "read_record",
    "record_digest", "stored", "write_record",
]
