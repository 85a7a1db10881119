"""The dimensionless model against the numbers printed in physics.md §1-§8."""
import numpy as np
import pytest

from solver.bsp import model as M
from solver.config import ConfigError


@pytest.fixture(scope="module")
def std():
    return M.Model(M.load())


def test_scales_and_constants(std):
    s = std.scales
    assert s.energy_eV == pytest.approx(0.025852, rel=2e-5)
    assert s.t == pytest.approx(0.29660e-12, rel=2e-5)
    assert s.v == pytest.approx(6.74308e4, rel=1e-5)
    assert s.rho == pytest.approx(3.39267e17, rel=1e-5)
    assert s.n == pytest.approx(4.24084e25, rel=1e-5)
    assert s.j == pytest.approx(3665.3, rel=1e-4)
    assert std.cs1 == pytest.approx(0.046055, rel=2e-5)
    assert std.eta == pytest.approx(0.4)
    assert std.cp == pytest.approx(1899.76, rel=1e-5)
    assert std.alpha == pytest.approx(0.012926, rel=5e-5)
    assert std.V_G == pytest.approx((19.341, 19.341), rel=5e-5)
    assert std.V_DS == pytest.approx(3.868, rel=1e-4)
    assert std.V_c.min() == pytest.approx(-121.85, rel=1e-4)
    assert std.N_D.max() == pytest.approx(2.3580, rel=1e-4)
    assert std.w_max == pytest.approx(36.554, rel=1e-4)


def test_node_classification_standard_mesh(std):
    si = np.flatnonzero(~std.oxide_z)
    assert (si[0], si[-1]) == (9, 55)
    assert np.flatnonzero(std.region_x == 0)[-1] == 16
    assert np.flatnonzero(std.region_x == 2)[0] == 48
    g = np.flatnonzero(std.gate_x)
    assert (g[0], g[-1]) == (13, 51)
    # interface nodes are oxide: half-node eps_r there is (3.9 + 11.7)/2 = 7.8
    assert std.eps_r[0, 8] == 3.9 and std.eps_r[0, 9] == 11.7
    assert std.int_ND_contact == pytest.approx(1.7317, rel=1e-4)


def test_scattering_tables(std):
    C = [3.3006e-2, 5.782e-4, 9.639e-4, 5.4416e-2, 1.3246e-4, 2.5904e-3, 1.8908e-3]
    np.testing.assert_allclose(std.phonon_C, C, rtol=2e-4)
    N5 = std.occupation(5)
    assert N5[0, 2] == pytest.approx(0.48182, rel=1e-4)
    assert N5[2, 0] == pytest.approx(0.12324, rel=1e-4)
    assert N5[0, 1] == pytest.approx(0.2329, rel=1e-3)
    be = M.Model(M.load(None, ["physics.occupation=bose_einstein"])).occupation(5)
    np.testing.assert_allclose(be, 0.23285652, rtol=1e-6)
    scaled = M.Model(M.load(None, ["physics.kernel_scale=2.0"]))
    np.testing.assert_allclose(scaled.phonon_C, 2 * std.phonon_C)


def test_cfl_maxima_and_maxwellian(std):
    assert std.A1 == pytest.approx(12.2417, rel=1e-5)
    assert std.A3 == pytest.approx(6.5587, rel=1e-5)
    # the discrete normalisation dw dphi sum_l sum_m s_nu(w_l) e^{-w_l}
    norm = 1.0 / std.maxwellian[:, 0] * np.exp(-std.w[0])
    np.testing.assert_allclose(norm, [2.77970, 2.77970, 1.22394], rtol=2e-5)


@pytest.mark.parametrize(
    "override, key",
    [
        ("mesh.NPHI=47", "mesh.NPHI"),
        ("time.cfl=1.2", "time.cfl"),
        ("mesh.NX=-4", "mesh.NX"),
        ("mesh.bogus=1", "mesh"),
        ("physics.occupation=fermi", "physics.occupation"),
        ("numerics.backend=opencl", "numerics.backend"),
        ("device.gate_end_nm=30", "device.gate_end_nm"),
    ],
)
def test_bad_config_names_key(override, key):
    with pytest.raises(ConfigError, match=f"'{key}'"):
        M.load(None, [override])


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        M.load(tmp_path / "missing.yaml")


def test_cli_reports_bad_key_without_traceback(capsys, tmp_path):
    from solver.cli import main

    rc = main(["run", "--out", str(tmp_path), "--set", "mesh.NPHI=47"])
    err = capsys.readouterr().err
    assert rc == 2 and "'mesh.NPHI'" in err and "even integer" in err and "Traceback" not in err
