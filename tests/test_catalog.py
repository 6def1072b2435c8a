"""The frozen catalog and inventory: schemas, native order, and the installed-file check."""

from __future__ import annotations

import json
import shutil

import jsonschema
import pytest

from pytest_libero.benchmarks.libero import catalog, inventory
from pytest_libero.core.cells import Cell, parse_cell_id
from pytest_libero.errors import InventoryMismatch
from pytest_libero.core.data import CATALOG_DIR, SCHEMA_DIR


@pytest.mark.parametrize("name", ["libero_catalog", "source_inventory"])
def test_catalog_files_validate_against_their_schemas(name):
    schema = json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    document = json.loads((CATALOG_DIR / f"{name}.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(document)


def test_schema_rejects_a_broken_catalog():
    schema = json.loads((SCHEMA_DIR / "libero_catalog.schema.json").read_text())
    document = json.loads((CATALOG_DIR / "libero_catalog.json").read_text())
    del document["entries"][3]["reference_horizon"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, schema)


def test_130_entries_in_native_order_with_reference_horizons():
    entries = catalog.entries()
    assert len(entries) == 130
    expected = [(s, i) for s, n in zip(catalog.SUITES, (10, 10, 10, 90, 10), strict=True) for i in range(n)]
    assert [(e["suite"], e["task_index"]) for e in entries] == expected
    horizons = {e["suite"]: e["reference_horizon"] for e in entries}
    assert horizons == {"libero_spatial": 220, "libero_object": 280, "libero_goal": 300,
                        "libero_90": 400, "libero_10": 520}
    assert all(e["num_init_states"] == 50 for e in entries)
    assert catalog.entry("libero_10", 0)["language"] == (
        "put both the alphabet soup and the tomato sauce in the basket")


def test_inventory_pins_the_upstream_revision_and_every_entry():
    inv = catalog.load_inventory()
    assert inv["upstream"]["revision"] == "8f1084e3132a39270c3a13ebe37270a43ece2a01"
    assert [(e["suite"], e["task_index"]) for e in inv["entries"]] == [
        (e["suite"], e["task_index"]) for e in catalog.entries()]


@pytest.mark.parametrize("cell", [Cell("libero_10", 0), Cell("libero_90", 89, 49), Cell("libero_spatial", 3)])
def test_cell_ids_are_readable_and_invertible(cell):
    assert parse_cell_id(cell.id) == (cell.suite, cell.task_index, cell.init_index)
    assert parse_cell_id(f"cases/test_libero.py::test_rollout[{cell.id}]") == (
        cell.suite, cell.task_index, cell.init_index)
    assert Cell("libero_10", 0).id == "libero_10-t00-s00"


@pytest.mark.parametrize("text", ["test_x", "tests/test_a.py::test_b[1-2]", "libero_10-t0-s00"])
def test_non_cell_ids_parse_to_none(text):
    assert parse_cell_id(text) is None


def test_installed_libero_matches_the_inventory():
    assert inventory.check_installation() == []


def test_a_changed_file_is_named_in_the_mismatch(tmp_path, monkeypatch):
    real = inventory.InstalledLibero.locate()
    copy = tmp_path / "libero"
    for sub in ("bddl_files/libero_10", "init_files/libero_10"):
        shutil.copytree(real.root / sub, copy / sub)
    target = copy / "bddl_files" / catalog.entry("libero_10", 3)["bddl_file"]
    target.write_text(target.read_text() + "\n; tampered\n")
    monkeypatch.setattr(inventory.InstalledLibero, "locate", classmethod(lambda cls: cls(copy)))
    with pytest.raises(InventoryMismatch) as info:
        inventory.check_installation(catalog.load_inventory()["entries"][-10:])
    assert str(target) in str(info.value) and "1 installed LIBERO file(s)" in str(info.value)
    assert "--libero-allow-source-mismatch" in str(info.value)
