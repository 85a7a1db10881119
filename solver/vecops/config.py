"""The ``vecops:`` configuration section: loading, defaults and validation."""
from __future__ import annotations

import json
from pathlib import Path

from solver.config import ConfigError, apply_overrides, load_schema, load_yaml, validate

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "vecops.schema.yaml"


def schema() -> dict:
    return load_schema(SCHEMA_PATH)


def resolve(section: dict | None, overrides=()) -> dict:
    """Validate a ``vecops`` section (defaults filled); bad values raise ConfigError naming the key."""
    cfg = validate(apply_overrides(section or {}, overrides), schema(), where="vecops")
    sv = cfg["spmv_vector"]
    if sv["nnz_per_row"] > sv["rows"]:
        raise ConfigError(f"vecops key 'spmv_vector.nnz_per_row': {sv['nnz_per_row']} exceeds rows = {sv['rows']}")
    for name, (rows, k) in cfg["spmv_scalar"]["matrices"].items():
        if k > rows:
            raise ConfigError(f"vecops key 'spmv_scalar.matrices.{name}': {k} nonzeros per row exceeds {rows} rows")
    return cfg


def load(config_path=None, config_json=None, overrides=()) -> dict:
    """The resolved section from a workflow YAML (its ``vecops:`` key) or a JSON string of the section."""
    if config_json is not None:
        try:
            section = json.loads(config_json)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"--config-json is not valid JSON: {exc}") from exc
    elif config_path is not None:
        section = load_yaml(config_path).get("vecops") or {}
    else:
        section = {}
    return resolve(section, overrides)
