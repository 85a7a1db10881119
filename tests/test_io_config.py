"""solver.io and solver.config (issue 17): files honour the umask, numbers are finite and integers
integral, option types refuse what they cannot take, the output folder is checked up front."""
import argparse
import os

import pandas as pd
import pytest

from solver import config as C
from solver import io

SCHEMA = {"type": "object", "properties": {
    "a": {"type": "number", "minimum": 0, "default": 1.0},
    "n": {"type": "integer", "minimum": 1, "default": 2},
    "m": {"type": ["integer", "null"], "default": None},
    "s": {"type": "object", "properties": {"x": {"type": "number"}}, "default": {}},
}}


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_atomic_writes_honour_the_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        io.write_json(tmp_path / "a.json", {"x": 1})
        io.write_csv(pd.DataFrame({"x": [1]}), tmp_path / "b.csv")
        io.write_hdf5(tmp_path / "c.h5", {"x": [1.0]})
    finally:
        os.umask(old)
    for name in ("a.json", "b.csv", "c.h5"):
        assert (tmp_path / name).stat().st_mode & 0o777 == mode, name


@pytest.mark.parametrize("cfg,words", [
    ({"a": float("nan")}, "'a': nan is not a finite number; allowed: type number, >= 0"),
    ({"a": float("inf")}, "'a': inf is not a finite number"),
    ({"s": {"x": float("-inf")}}, "'s.x': -inf is not a finite number"),
    ({"n": 3.0}, "'n': 3.0 is not an integer; allowed: type integer, >= 1"),
    ({"m": 3.5}, "'m': 3.5 is not of type 'integer', 'null'"),
    ({"n": 0, "a": -1}, "(and 1 more)"),
])
def test_numbers_are_finite_and_integers_integral(cfg, words):
    with pytest.raises(C.ConfigError) as exc:
        C.validate(cfg, SCHEMA)
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_finite_numbers_pass():
    assert C.validate({"a": 0.5, "m": 3, "s": {"x": -2.0}}, SCHEMA) == {"a": 0.5, "n": 2, "m": 3, "s": {"x": -2.0}}


def test_yaml_errors_name_file_and_line(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("a: 1\nb: x: 2\n")
    with pytest.raises(C.ConfigError, match=r"c.yaml', line 2: not valid YAML: mapping values are not allowed"):
        C.load_yaml(p)
    p.write_bytes(b"a: 1\n\nb: \xff\n")
    with pytest.raises(C.ConfigError, match=r"line 3: not UTF-8 text \(byte 0xff\)"):
        C.load_yaml(p)


@pytest.mark.parametrize("kind,text,value", [
    (C.int_option(1), "3", 3), (C.float_option(exclusive_minimum=0), "0.5", 0.5),
    (C.float_option(minimum=0, maximum=1), "1", 1.0),
    (C.list_option(C.int_option(2), "integers >= 2"), "2,3,", [2, 3]),
])
def test_option_types_accept(kind, text, value):
    assert kind(text) == value


@pytest.mark.parametrize("kind,text,words", [
    (C.int_option(1), "0", "'0' given; allowed: an integer >= 1"),
    (C.int_option(1), "1.5", "'1.5' is not an integer >= 1"),
    (C.float_option(exclusive_minimum=0), "nan", "'nan' given; allowed: a finite number > 0"),
    (C.float_option(), "-inf", "'-inf' given; allowed: a finite number"),
    (C.float_option(minimum=0, maximum=1), "1.01", "allowed: a finite number >= 0 <= 1"),
    (C.list_option(C.int_option(2), "integers >= 2"), "4,1", "'4,1' given; allowed: a comma list of integers >= 2"),
    (C.list_option(C.int_option(2), "integers >= 2"), ",", "a comma list of integers >= 2"),
])
def test_option_types_refuse(kind, text, words):
    with pytest.raises(argparse.ArgumentTypeError) as exc:
        kind(text)
    assert words in str(exc.value)


def test_out_dir_checks_create_nothing(tmp_path):
    (tmp_path / "f").write_text("")
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    for path, words in [(tmp_path / "f", "is a file"), (tmp_path / "f" / "x", "is a file"),
                        (tmp_path / "repo", "root of a git working tree")]:
        with pytest.raises(C.ConfigError, match=words):
            io.check_out_dir(path)
    before = sorted(tmp_path.rglob("*"))
    assert io.check_out_dir(tmp_path / "new" / "run") == tmp_path / "new" / "run"
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.parametrize("text, value", [("1e-7", 1e-7), ("-2E+3", -2000.0), ("5e10", 5e10), ("1.0e-6", 1e-6),
                                         (".5", 0.5), ("12", 12), ("6x65x65x300x48", "6x65x65x300x48"),
                                         ("1e", "1e"), ("e5", "e5"), ("1e-7x", "1e-7x")])
def test_numbers_read_as_yaml_1_2(text, value):
    """An exponent without a dot (1e-7) is a float in --set values and in config files (YAML 1.2; PyYAML's YAML 1.1
    read it as a string, which the schema refused as 'not of type number'); words that merely contain one stay
    strings."""
    got = C.apply_overrides({}, [f"a.b={text}"])["a"]["b"]
    assert got == value and type(got) is type(value)


def test_exponent_floats_pass_validation(tmp_path):
    from solver.bsp.model import load

    assert load(None, ["numerics.weno_eps=1e-7"])["numerics"]["weno_eps"] == 1e-7
    f = tmp_path / "c.yaml"
    f.write_text("numerics: {weno_eps: 1e-7}\ntime: {first_dt_s: 2e-17}\n")
    assert C.load_yaml(f) == {"numerics": {"weno_eps": 1e-7}, "time": {"first_dt_s": 2e-17}}
    c = load(str(f), [])
    assert c["numerics"]["weno_eps"] == 1e-7 and c["time"]["first_dt_s"] == 2e-17
