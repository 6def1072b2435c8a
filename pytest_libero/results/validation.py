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
  uses a keyword the block checks do not know keeps its `items` in the bulk schema.
"""

from __future__ import annotations

import copy
import functools
import json
from itertools import chain
from typing import Any, Callable

BLOCKS = ("observations", "chunks")  # the record's fields that are blocks of columns (schemas 2, 3)
_NUMBER_TYPES = {"integer": {int}, "number": {int, float}, "string": {str}}

ColumnCheck = Callable[[list[Any]], bool]


def record_problem(record: Any) -> str | None:
    """Why `record` is not a schema-valid episode record (schema 1, 2 or 3), or None when it is."""
    validate, invalid = _full_validator()
    try:
        validate(record)
    except invalid as exc:
        return str(exc.message)
    return None


def is_valid_record(record: Any) -> bool:
    """Whether `record` is schema-valid: the same answer as `record_problem(record) is None`."""
    validate, invalid, columns = _bulk_validator()
    try:
        validate(record)
    except invalid:
        return record_problem(record) is None
    for block, column, check in columns:
        value = record[block]
        if isinstance(value, dict) and column in value and not check(value[column]):
            return record_problem(record) is None
    return True


def _schema() -> dict[str, Any]:
    from pytest_libero.core.data import SCHEMA_DIR

    return json.loads((SCHEMA_DIR / "episode_record.schema.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


@functools.cache  # one compiled validator per process, not one per record
def _full_validator() -> tuple[Callable[[Any], Any], type[Exception]]:
    import fastjsonschema

    # The exception class is taken with the compiled function: a later import of another
    # fastjsonschema module object (a test that reloads modules) must not let its errors escape.
    return fastjsonschema.compile(_schema()), fastjsonschema.JsonSchemaException


@functools.cache
def _bulk_validator() -> tuple[Callable[[Any], Any], type[Exception], list[tuple[str, str, ColumnCheck]]]:
    import fastjsonschema

    schema, columns = bulk_schema(_schema())
    return fastjsonschema.compile(schema), fastjsonschema.JsonSchemaException, columns


def bulk_schema(schema: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str, ColumnCheck]]]:
    """`schema` without the `items` of the block columns it can check as blocks, and those checks
    as (block, column, check)."""
    schema = copy.deepcopy(schema)
    columns = []
    for block in BLOCKS:
        for column, spec in schema["properties"][block].get("properties", {}).items():
            if spec.get("type") != "array" or "items" not in spec:
                continue
            check = block_check(spec["items"])
            if check is not None:
                del spec["items"]
                columns.append((block, column, check))
    return schema, columns


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
