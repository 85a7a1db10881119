"""Every report item of the workflow has a caption file, and every figure the rules make is a
report item (issue #15: the RGF figures were missing from the report).  Static: reads the .smk files."""
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RULES = sorted((REPO / "workflow" / "rules").glob("*.smk"))
REPORT = REPO / "workflow" / "report"


def _report_calls():
    """(file, text of each report(...) call) with balanced parentheses."""
    for f in RULES:
        s = f.read_text()
        for m in re.finditer(r"\breport\(", s):
            depth, i = 1, m.end()
            while depth:
                depth += {"(": 1, ")": -1}.get(s[i], 0)
                i += 1
            yield f.name, s[m.start():i]


def test_every_report_item_has_an_existing_caption():
    calls = list(_report_calls())
    assert len(calls) > 50
    for name, call in calls:
        m = re.search(r'(?:report_caption|_caption)\("([A-Za-z0-9_]+)"', call)
        assert m, f"{name}: report item without a caption: {call}"
        assert (REPORT / f"{m.group(1)}.rst").is_file(), f"{name}: caption {m.group(1)}.rst missing"


def test_every_figure_is_a_report_item():
    """Each .png output named in a rule is wrapped in report(...)."""
    reported = " ".join(call for _, call in _report_calls())
    vecops = (REPO / "workflow" / "rules" / "vecops.smk").read_text()
    assert 'report(res("vecops", f)' in reported and "for f in VECOPS_FIGURES]" in vecops  # a list of them
    listed = re.search(r"VECOPS_FIGURES = \[[^]]*\]", vecops).group(0)
    for f in RULES:
        for png in re.findall(r'"([A-Za-z0-9_{}]+\.png)"', f.read_text()):
            assert png in reported or png in listed, f"{f.name}: {png} is not in the report"
    for png in ("fig8bc_transmission_ldos.png", "fig8a_strong_scaling.png", "fig7_cases.png", "fig2_cost.png", "bulk_bands.png"):
        assert png in reported


def test_captions_are_used():
    """No caption file without a report item (except the workflow's own description); the pattern
    also matches the iv rules' ``_iv_caption("...")``."""
    used = {re.search(r'(?:report_caption|_caption)\("([A-Za-z0-9_]+)"', c).group(1) for _, c in _report_calls()}
    assert {"iv_points", "iv_idvg", "iv_traces"} <= used
    used |= {"workflow"}
    assert {p.stem for p in REPORT.glob("*.rst")} <= used
