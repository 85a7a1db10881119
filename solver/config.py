"""YAML configuration validated against a JSON schema, with defaults filled from the schema.

A bad value stops with :class:`ConfigError` naming the key and what is allowed, never with a
traceback from the numerics.  ``--set key.sub=value`` overrides are parsed as YAML scalars.  Both read numbers as
YAML 1.2 does: ``1e-7`` and ``2E+3`` are floats (PyYAML's YAML 1.1 wants a dot, ``1.0e-7``, and read the others as
strings, which the schema then refused).
"""
from __future__ import annotations

import argparse
import copy
import math
import re
import sys
from pathlib import Path

import yaml


class _Loader(yaml.SafeLoader):
    """yaml.SafeLoader that also reads exponent floats without a dot (1e-7, -2E+3, 5e10) as floats (YAML 1.2)."""


_EXP_FLOAT = re.compile(r"^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$")
_Loader.add_implicit_resolver("tag:yaml.org,2002:float", _EXP_FLOAT, list("-+0123456789"))


def _safe_load(text):
    return yaml.load(text, Loader=_Loader)


def yaml12_numbers(tree):
    """In place, and returned: every string of a loaded YAML tree that YAML 1.2 reads as an exponent float (``1e-7``)
    becomes that float.  For trees another loader read as YAML 1.1: Snakemake's ``--configfile`` (the Snakefile calls
    this before validating, so ``rtol: 5e-3`` in a workflow config is a number there as in the solver's configs)."""
    items = tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, list) else ()
    for k, v in list(items):
        if isinstance(v, str) and _EXP_FLOAT.match(v):
            tree[k] = float(v.replace("_", ""))
        else:
            yaml12_numbers(v)
    return tree


class ConfigError(ValueError):
    """A bad input (configuration value, option, file or folder); the message is one line naming
    the key or option, what was given and what is allowed.  ``python -m solver`` prints it and
    exits with code 2."""


class SourceFaulted(ConfigError):
    """continuation.init_from names a run that ended with a numerical fault (its final_state.h5 is a fault
    marker, output.on_fault = record): a ConfigError, except that a run with output.on_fault = record and an
    output folder records it as its own fault (Simulation.run) so a chain of bias points reports it instead of stopping.
    ``root_fault``: the chain's first fault (the message of the run that faulted itself)."""

    root_fault = ""


class RunFault(RuntimeError):
    """A run stopped on a numerical fault (non-finite values, negative density, Newton failure);
    the message names the step, stage and phase and the checkpoint kept.  Exit code 3."""


class Interrupted(RuntimeError):
    """A run stopped by SIGINT or SIGTERM (Ctrl-C, ``kill``, SLURM's time limit or preemption, Snakemake
    stopping its jobs): the signal was taken at the end of a step and a checkpoint of that step written,
    so the same command resumes the run.  ``signum``: the signal; exit code 128 + signum (130, 143)."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.signum = signum


def load_yaml(path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(f"config file {str(path)!r}, line {line}: not UTF-8 text (byte {raw[exc.start]:#04x})") from None
    try:
        data = _safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f", line {mark.line + 1}" if mark is not None else ""
        what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if "\\t" in what:
            what += " (indent with spaces, not tabs)"
        raise ConfigError(f"config file {str(path)!r}{where}: not valid YAML: {what}") from None
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
        try:
            node[parts[-1]] = _safe_load(raw)
        except yaml.YAMLError:
            raise ConfigError(f"override {item!r}: the value is not a YAML scalar") from None
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


def _types(schema: dict) -> set:
    t = schema.get("type", ())
    return {t} if isinstance(t, str) else set(t)


def check_numbers(cfg, schema: dict, where: str = "config", prefix: str = "") -> None:
    """Every number finite (JSON schema cannot say so; NaN passes ``minimum``), and a value the
    schema types as integer given as an integer (not ``33.0``)."""
    if isinstance(cfg, dict):
        props = schema.get("properties", {})
        for k, v in cfg.items():
            check_numbers(v, props.get(k, {}), where, f"{prefix}{k}.")
    elif isinstance(cfg, list):
        for i, v in enumerate(cfg):
            check_numbers(v, schema.get("items", {}) if isinstance(schema.get("items"), dict) else {},
                          where, f"{prefix}{i}.")
    elif isinstance(cfg, float):
        key = prefix.rstrip(".")
        if not math.isfinite(cfg):
            raise ConfigError(f"{where} key '{key}': {cfg} is not a finite number; allowed: {_describe(schema)}")
        if "integer" in _types(schema) and "number" not in _types(schema):
            raise ConfigError(f"{where} key '{key}': {cfg} is not an integer; allowed: {_describe(schema)}")


def validate(cfg: dict, schema: dict, where: str = "config") -> dict:
    """Fill defaults, then validate; raise ConfigError naming the first bad key.

    Without jsonschema (e.g. a bare GPU machine) only unknown keys are checked, with a warning;
    the workflow validates the same sections fully where Snakemake runs."""
    cfg = fill_defaults(copy.deepcopy(cfg), schema)
    try:
        import jsonschema
    except ImportError:
        print(f"warning: jsonschema is not installed; {where} checked for unknown keys and numbers only",
              file=sys.stderr)
        _check_keys(cfg, schema, where)
        check_numbers(cfg, schema, where)
        return cfg
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(cfg), key=lambda e: (len(e.path), list(map(str, e.path))))
    if errors:  # the first bad key, on one line
        e = errors[0]
        key = ".".join(str(p) for p in e.path) or "(top level)"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        if e.validator == "additionalProperties":
            allowed = ", ".join(sorted(e.schema.get("properties", {})))
            raise ConfigError(f"{where} key '{key}': {e.message}; allowed keys: {allowed}{more}")
        if e.validator == "required":
            raise ConfigError(f"{where} key '{key}': {e.message}{more}")
        raise ConfigError(f"{where} key '{key}': {e.message}; allowed: {_describe(e.schema)}{more}")
    check_numbers(cfg, schema, where)
    return cfg


def load_schema(path) -> dict:
    """A schema of this package: parsed by libyaml where PyYAML has it (the same mapping as
    ``yaml.safe_load``, a sixth of its time: ~7 vs ~40 ms for solver/bsp/schema.yaml, paid at every
    start-up); a user's configuration stays with ``safe_load`` and its error messages."""
    with open(path) as f:
        return yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def load_config(path, schema: dict, overrides=()) -> dict:
    return validate(apply_overrides(load_yaml(path), overrides), schema)


# ---------------------------------------------------------------------- command-line options
def _option_type(kind, what: str, ok):
    """An argparse ``type``: parse with ``kind``; refuse unless finite and ``ok(value)``."""
    def parse(text):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if (isinstance(v, float) and not math.isfinite(v)) or not ok(v):
            raise argparse.ArgumentTypeError(f"{text!r} given; allowed: {what}")
        return v
    parse.__name__ = what  # argparse names the type in its own messages
    return parse


def int_option(minimum: int):
    """An integer option >= ``minimum``."""
    return _option_type(int, f"an integer >= {minimum}", lambda v: v >= minimum)


def float_option(minimum=None, exclusive_minimum=None, maximum=None):
    """A finite float option within the given bounds."""
    bits = ["a finite number"]
    if minimum is not None:
        bits.append(f">= {minimum}")
    if exclusive_minimum is not None:
        bits.append(f"> {exclusive_minimum}")
    if maximum is not None:
        bits.append(f"<= {maximum}")
    return _option_type(float, " ".join(bits), lambda v: (minimum is None or v >= minimum)
                        and (exclusive_minimum is None or v > exclusive_minimum) and (maximum is None or v <= maximum))


def list_option(item, what: str):
    """A comma list (at least one item) whose items parse with the option type ``item``."""
    def parse(text):
        parts = [p for p in str(text).split(",") if p.strip()]
        if not parts:
            raise argparse.ArgumentTypeError(f"{text!r} given; allowed: a comma list of {what}")
        try:
            return [item(p.strip()) for p in parts]
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(f"{text!r} given; allowed: a comma list of {what}") from None
    parse.__name__ = f"comma list of {what}"
    return parse
