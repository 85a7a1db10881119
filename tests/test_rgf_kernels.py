"""The optimization cases of Table 3 (paper 002) through solver.dispatch: case -> table entry, and
the errors for an unknown case or GPU kernel."""
import importlib.util

import pytest

from solver.backend import BackendUnavailable, numba_available
from solver.rgf.kernels import REGISTRY, case_ops


@pytest.mark.skipif(not numba_available(), reason="numba not installed")
def test_numba_table_holds_cases_1_to_4():
    assert REGISTRY.names("numba") == ["aos", "sched", "soa", "tiled"]
    assert [case_ops(c).case for c in (1, 2, 3, 4)] == [1, 2, 3, 4]


def test_unknown_case_or_kernel_fails():
    with pytest.raises(ValueError, match="optimization case must be one of"):
        case_ops(6)
    with pytest.raises(ValueError, match="gpu_kernel must be one of"):
        case_ops(5, "cutlass")


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed")
def test_case5_without_cupy_is_unavailable():
    assert REGISTRY.table("cupy") == {}
    with pytest.raises(BackendUnavailable, match="case 5"):
        case_ops(5)
