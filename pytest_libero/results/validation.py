"""Checking episode records against catalog/schemas/episode_record.schema.json (the one definition),
fast enough for a report of 10,000 records.

Two validators are compiled from that one schema file by fastjsonschema:

- the full one, the schema as written: `record_problem` says why a record is not valid;
- the bulk one, used by `is_valid_record` when thousands of records are read (report, merge,
  resume, the session end). It is the same schema with the `items` of the block columns taken
  out (schemas 2 and 3 keep `observations` and `chunks` as columns with one entry per policy
  call; checked element by element they were most of a report's time), and each column is checked
  as a block instead, with set, map, min and max over the whole list. A block check is the removed
  `items` or stricter (an integer column takes Python ints only, not 5.0), so whatever the bulk
  check passes the full schema passes; whatever it refuses goes to the full validator, which
  decides. Which columns are checked as blocks is derived from the schema: a column whose `items`
  uses a keyword the block checks do not know keeps its `items` in the bulk schema. The schema's
  version rules (`allOf`: block form and digest encoding by `schema_version`) are checked in
  Python too, when they are the rules this module knows (`version_rules`), else compiled.
"""

from __future__ import annotations

import copy
import functools
from itertools import chain
from typing import Any, Callable

BLOCKS = ("observations", "chunks")  # the record's fields that are blocks of columns (schemas 2, 3)
_NUMBER_TYPES: dict[str, set[type]] = {"integer": {int}, "number": {int, float}, "string": {str}}

ColumnCheck = Callable[[list[Any]], bool]
RecordCheck = Callable[[dict[str, Any]], bool]


def record_problem(record: Any) -> str | None:
    """Why `record` is not a schema-valid episode record (schema 1, 2 or 3), or None when it is."""
    validate, invalid = _full_validator()
    try:
        validate(record)
    except invalid as exc:
        return str(getattr(exc, "message", exc))  # fastjsonschema's JsonSchemaValueException
    return None


def is_valid_record(record: Any) -> bool:
    """Whether `record` is schema-valid: the same answer as `record_problem(record) is None`."""
    validate, invalid, columns, rules = _bulk_validator()
    try:
        validate(record)
    except invalid:
        return record_problem(record) is None
    for block, column, check in columns:
        value = record[block]
        if isinstance(value, dict) and column in value and not check(value[column]):
            return record_problem(record) is None
    if rules is not None and not rules(record):
        return record_problem(record) is None
    return True


def _schema() -> dict[str, Any]:
    from pytest_libero.core.data import read_json

    return read_json("schemas/episode_record.schema.json")


@functools.cache  # one compiled validator per process, not one per record
def _full_validator() -> tuple[Callable[[Any], Any], type[Exception]]:
    import fastjsonschema

    # The exception class is taken with the compiled function: a later import of another
    # fastjsonschema module object (a test that reloads modules) must not let its errors escape.
    return fastjsonschema.compile(_schema()), fastjsonschema.JsonSchemaException


@functools.cache
def _bulk_validator() -> tuple[Callable[[Any], Any], type[Exception], list[tuple[str, str, ColumnCheck]],
                               RecordCheck | None]:
    import fastjsonschema

    schema, columns, rules = bulk_schema(_schema())
    return fastjsonschema.compile(schema), fastjsonschema.JsonSchemaException, columns, rules


def bulk_schema(schema: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str, ColumnCheck]],
                                                RecordCheck | None]:
    """`schema` without the `items` of the block columns it can check as blocks, and those checks
    as (block, column, check); and without its version rules (`allOf`) when they are the ones
    `version_rules` knows, with those as a check of their own (else None, and `allOf` stays)."""
    schema = copy.deepcopy(schema)
    rules = version_rules(schema.get("allOf"))
    if rules is not None:
        del schema["allOf"]
    columns = []
    for block in BLOCKS:
        for column, spec in schema["properties"][block].get("properties", {}).items():
            if spec.get("type") != "array" or "items" not in spec:
                continue
            check = block_check(spec["items"])
            if check is not None:
                del spec["items"]
                columns.append((block, column, check))
    return schema, columns, rules


HEX_DIGESTS = "^([0-9a-f]{64})*$"  # schema 2's digest columns
BASE64_DIGESTS = "^([A-Za-z0-9+/]{43}=)*$"  # schema 3's


def _rules_as_written() -> list[dict[str, Any]]:
    """The record schema's `allOf`, less its comments: which block form each version takes, and which
    digest encoding."""
    def forms(kind: str) -> dict[str, Any]:
        return {"properties": {block: {"type": kind} for block in BLOCKS}}

    def digests(pattern: str) -> dict[str, Any]:
        observations = {"properties": {"sha256": {"additionalProperties": {"pattern": pattern}}}}
        chunks = {"properties": {"sha256": {"pattern": pattern}}}
        return {"properties": {"observations": observations, "chunks": chunks}}

    return [{"if": {"properties": {"schema_version": {"enum": [2, 3]}}}, "then": forms("object"),
             "else": forms("array")},
            {"if": {"properties": {"schema_version": {"const": 3}}}, "then": digests(BASE64_DIGESTS),
             "else": digests(HEX_DIGESTS)}]


def version_rules(all_of: Any) -> RecordCheck | None:
    """The schema's version rules as one check in Python, or None when `all_of` is not what
    `_rules_as_written` gives. fastjsonschema evaluates each `if` and each digest pattern (a regular
    expression over thousands of characters) apart: about half the bulk check's time."""
    if not isinstance(all_of, list) or [{k: v for k, v in rule.items() if k != "$comment"} for rule in all_of] \
            != _rules_as_written():
        return None

    def check(record: dict[str, Any]) -> bool:
        version = record["schema_version"]
        observations, chunks = record["observations"], record["chunks"]
        blocks = version in (2, 3)
        if isinstance(observations, dict) != blocks or isinstance(chunks, dict) != blocks:
            return False
        if not blocks:
            return True
        digests = base64_digests if version == 3 else hex_digests
        columns = list(observations.get("sha256", {}).values())
        if isinstance(chunks.get("sha256"), str):
            columns.append(chunks["sha256"])
        return all(digests(column) for column in columns if isinstance(column, str))

    return check


_HEX = b"0123456789abcdef"
_BASE64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def hex_digests(column: str) -> bool:
    """Whether `column` matches HEX_DIGESTS: 64-character runs of lowercase hex."""
    return len(column) % 64 == 0 and column.isascii() and not column.encode().translate(None, _HEX)


def base64_digests(column: str) -> bool:
    """Whether `column` matches BASE64_DIGESTS: runs of 43 base64 characters and one `=`."""
    count, rest = divmod(len(column), 44)
    return (rest == 0 and column.isascii() and column.count("=") == count and column[43::44] == "=" * count
            and not column.encode().translate(None, _BASE64 + b"="))


def block_check(items: dict[str, Any]) -> ColumnCheck | None:
    """A check of a whole list against the JSON Schema `items` (integer, number or string, with
    minimum and maximum; or arrays of those, with minItems and maxItems), or None for any other."""
    kind = items.get("type")
    keywords = set(items) - {"type", "description"}
    if kind in _NUMBER_TYPES and keywords <= ({"minimum", "maximum"} if kind != "string" else set()):
        types = _NUMBER_TYPES[kind]
        low, high = items.get("minimum"), items.get("maximum")

        def scalars(column: list[Any]) -> bool:
            if not set(map(type, column)) <= types:
                return False
            if column and low is not None and not min(column) >= low:
                return False
            return not (column and high is not None and not max(column) <= high)

        return scalars
    if kind == "array" and keywords <= {"items", "minItems", "maxItems"}:
        inner = block_check(items["items"]) if "items" in items else (lambda column: True)
        if inner is None:
            return None
        shortest, longest = items.get("minItems", 0), items.get("maxItems")

        def arrays(column: list[Any]) -> bool:
            if not set(map(type, column)) <= {list}:
                return False
            lengths = set(map(len, column))
            if lengths and (min(lengths) < shortest or (longest is not None and max(lengths) > longest)):
                return False
            return inner(list(chain.from_iterable(column)))

        return arrays
    return None
