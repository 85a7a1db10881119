"""YAML configuration validated against a JSON schema, with defaults filled from the schema.

A bad value stops with :class:`ConfigError` naming the key and what is allowed, never with a
traceback from the numerics.  ``--set key.sub=value`` overrides are parsed as YAML scalars.
"""
from __future__ import annotations

import copy
import sys
from pathlib import Path

import yaml


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the key and what is allowed."""


def load_yaml(path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    with open(path) as f:
        data = yaml.safe_load(f) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(path)!r}: top level must be a mapping")
    return data


def apply_overrides(cfg: dict, overrides) -> dict:
    """Apply ``["a.b=1", "c=x"]`` to a copy of ``cfg``."""
    cfg = copy.deepcopy(cfg)
    for item in overrides or ():
        if "=" not in item:
            raise ConfigError(f"override {item!r}: expected KEY=VALUE (e.g. mesh.NX=33)")
        key, raw = item.split("=", 1)
        node = cfg
        parts = key.strip().split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r}: {p!r} is not a section")
        node[parts[-1]] = yaml.safe_load(raw)
    return cfg


def fill_defaults(cfg: dict, schema: dict) -> dict:
    """Recursively insert schema ``default`` values for missing properties."""
    if schema.get("type") != "object" and "properties" not in schema:
        return cfg
    for name, sub in schema.get("properties", {}).items():
        if name not in cfg:
            if "default" in sub:
                cfg[name] = copy.deepcopy(sub["default"])
            elif sub.get("type") == "object" and "properties" in sub:
                cfg[name] = {}
        if isinstance(cfg.get(name), dict):
            fill_defaults(cfg[name], sub)
    return cfg


def _describe(schema: dict) -> str:
    if "description" in schema:
        return schema["description"]
    bits = []
    if "enum" in schema:
        bits.append("one of " + ", ".join(map(repr, schema["enum"])))
    if "type" in schema:
        bits.append(f"type {schema['type']}")
    for k, sym in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<")):
        if k in schema:
            bits.append(f"{sym} {schema[k]}")
    if "multipleOf" in schema:
        bits.append(f"a multiple of {schema['multipleOf']}")
    return ", ".join(bits) or "see the schema"


def _check_keys(cfg, schema: dict, where: str, prefix: str = "") -> None:
    """Unknown keys only (the part of validation that needs no jsonschema)."""
    props = schema.get("properties")
    if not isinstance(cfg, dict) or props is None or schema.get("additionalProperties", True) is not False:
        return
    for k, v in cfg.items():
        if k not in props:
            raise ConfigError(f"{where} key '{prefix}{k}': unknown; allowed keys: {', '.join(sorted(props))}")
        _check_keys(v, props[k], where, f"{prefix}{k}.")


def validate(cfg: dict, schema: dict, where: str = "config") -> dict:
    """Fill defaults, then validate; raise ConfigError naming the first bad key.

    Without jsonschema (e.g. a bare GPU machine) only unknown keys are checked, with a warning;
    the workflow validates the same sections fully where Snakemake runs."""
    cfg = fill_defaults(copy.deepcopy(cfg), schema)
    try:
        import jsonschema
    except ImportError:
        print(f"warning: jsonschema is not installed; {where} checked for unknown keys only", file=sys.stderr)
        _check_keys(cfg, schema, where)
        return cfg
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(cfg), key=lambda e: (len(e.path), list(map(str, e.path))))
    if errors:
        lines = []
        for e in errors[:5]:
            key = ".".join(str(p) for p in e.path) or "(top level)"
            if e.validator == "additionalProperties":
                allowed = ", ".join(sorted(e.schema.get("properties", {})))
                lines.append(f"{where} key '{key}': {e.message}; allowed keys: {allowed}")
            elif e.validator == "required":
                lines.append(f"{where} key '{key}': {e.message}")
            else:
                lines.append(f"{where} key '{key}': {e.message}; allowed: {_describe(e.schema)}")
        raise ConfigError("\n".join(lines))
    return cfg


def load_schema(path) -> dict:
    with open(path) as f:
        return yaml.safe_load(f)


def load_config(path, schema: dict, overrides=()) -> dict:
    return validate(apply_overrides(load_yaml(path), overrides), schema)
