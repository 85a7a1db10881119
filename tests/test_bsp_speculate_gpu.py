"""numerics.bte_speculate on cupy (needs a GPU): runs with and without it are bitwise equal, with the BTE stage
launched (numerics.bte_graph false) and replayed from its graph (true), and stages are taken from ITER's launch;
kernel bsp_scal forms alpha = A_eps A_3 as the host does, bit for bit."""
import numpy as np
import pytest

from solver.bsp.model import Model, load

STATE = ("Phi", "V", "eps", "chi", "rho", "PhiHat", "deps_dx", "N")


def _cfg(*extra):
    return load(None, ["mesh.N_sbn=3", "mesh.NX=17", "mesh.NZ=17", "mesh.NW=40", "mesh.NPHI=12", "time.cfl=0.1",
                       "numerics.backend=cupy", "time.t_end_ps=null", "output.progress=false", "time.steps=15", *extra])


@pytest.mark.gpu
@pytest.mark.parametrize("graph", ["false", "true"])
def test_gpu_runs_with_and_without_speculation_bitwise(cupy_backend, graph):
    from solver.bsp.simulation import Simulation
    runs = {}
    for flag in ("false", "true", "true2"):
        spec = "false" if flag == "false" else "true"
        sim = Simulation(_cfg(f"numerics.bte_graph={graph}", f"numerics.bte_speculate={spec}"), cupy_backend, None,
                         progress=False)
        rec = sim.run(resume=False)
        st = sim.state
        runs[flag] = ({k: cupy_backend.to_numpy(getattr(st, k)) for k in STATE},
                      (st.A_eps, st.newton_iterations, st.t, [r["mean_current_A_per_m"] for r in sim.scalars]),
                      dict(sim.speculation), rec["timers"]["calls"]["step/BTE"])
    print(f"bte_graph={graph}: speculation {runs['true'][2]}")
    assert runs["false"][2] == {"bte_speculated": 0, "bte_speculation_dropped": 0}
    assert runs["true"][2]["bte_speculated"] >= 5, runs["true"][2]
    assert runs["true"][3] == 45 + runs["true"][2]["bte_speculation_dropped"]
    for other in ("true", "true2"):
        for k in STATE:
            assert np.array_equal(runs["false"][0][k], runs[other][0][k]), k
        assert runs["false"][1] == runs[other][1]


@pytest.mark.gpu
def test_gpu_scal_kernel_forms_the_hosts_alpha(cupy_backend):
    import cupy as cp

    from solver.bsp.kernels.cuda import rk
    model = Model(_cfg())
    rng = np.random.default_rng(7)
    for a in np.concatenate([rng.uniform(0, 50, 20), [0.0, 1e-300, 3.7e12]]):
        scal = rk.scal_into(model, cp.asarray(a)[()], 0.125, cp.empty(2))
        got = cp.asnumpy(scal)
        assert got[0] == float(float(a) * model.A3) and got[1] == 0.125


@pytest.mark.gpu
def test_gpu_run_resumed_with_a_kept_jacobian_bytewise(cupy_backend, kept_jacobian_resume):
    """A checkpoint between two Jacobian evaluations holds the kept Jacobian; the resumed step's first Newton
    iteration (iter_graph) must factor it first (iter_graph.newton_iteration: b shaped as construct_linsys's, the
    bug a SIGINT at step 531 of the standard mesh found, session 23) and the run ends byte for byte as the
    uninterrupted one, with numerics.bte_speculate on."""
    cfg = load(None, ["mesh.N_sbn=6", "mesh.NX=65", "mesh.NZ=65", "mesh.NW=60", "mesh.NPHI=12", "time.steps=9",
                      "numerics.backend=cupy", "time.t_end_ps=null", "output.progress=false",
                      "output.checkpoint_every_steps=7"])
    kept_jacobian_resume(cfg, cupy_backend, n=8, checkpoint_step=7)
