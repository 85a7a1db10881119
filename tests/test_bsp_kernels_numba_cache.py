"""numba's on-disk cache of the numba fast paths (solver/bsp/kernels/numba, ``cache=True``): the
kernels compile once per machine, not once per run (issue #14).

Two processes in a row run the same tiny simulation (start-up and 3 steps: every kernel of the step,
the kept-Jacobian path included) with the same fresh NUMBA_CACHE_DIR.  The first must compile (cache
misses, files written under that folder); the second must load every kernel it calls from the cache
(numba's dispatcher statistics: a hit for every compiled signature, no miss) and give bit-identical
results.  CPU only; skipped (reported by -ra) without numba.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("numba")

ROOT = Path(__file__).resolve().parents[1]

WORKER = r"""
import json, sys
import numpy as np
from numba.core.dispatcher import Dispatcher
from solver.bsp.model import load
from solver.bsp.simulation import Simulation
from solver.bsp.kernels.numba import iter as it, rk, scattering, weno

out = sys.argv[1]
# N_sbn = 3: POTENTIAL keeps its Jacobian from stage to stage (numba's newton_iteration runs; with 2 subbands
# every solve stalls into damped updates, which evaluate the Jacobian afresh)
cfg = load(None, ["mesh.N_sbn=3", "mesh.NX=17", "mesh.NZ=17", "mesh.NW=12", "mesh.NPHI=8",
                  "numerics.backend=numba", "numerics.threads=2", "time.steps=3"])
sim = Simulation(cfg, out_dir=out + "/run", progress=False)
sim.run()
st = sim.state
np.savez(out + "/state.npz", Phi=st.Phi, V=st.V, eps=st.eps, chi=st.chi)
kernels = {}
for mod in (it, rk, scattering, weno):
    for d in vars(mod).values():
        if isinstance(d, Dispatcher) and d.overloads:
            s = d.stats
            kernels[d.py_func.__module__ + "." + d.py_func.__qualname__] = dict(
                signatures=len(d.overloads), hits=sum(s.cache_hits.values()), misses=sum(s.cache_misses.values()),
                cache_path=s.cache_path)
json.dump(dict(kernels=kernels, steps=int(st.step)), open(out + "/stats.json", "w"))
"""


def _run(tmp: Path, cache: Path, name: str) -> tuple[dict, dict]:
    out = tmp / name
    out.mkdir()
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    env.pop("NUMBA_DISABLE_JIT", None)
    r = subprocess.run([sys.executable, "-c", WORKER, str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=1200)
    assert r.returncode == 0, r.stderr[-4000:]
    with np.load(out / "state.npz") as z:
        state = {k: z[k] for k in z.files}
    return json.loads((out / "stats.json").read_text()), state


def test_second_process_loads_every_kernel_from_the_cache(tmp_path):
    cache = tmp_path / "numba_cache"
    cold, cold_state = _run(tmp_path, cache, "cold")
    warm, warm_state = _run(tmp_path, cache, "warm")
    assert cold["steps"] == warm["steps"] == 3

    # first process: compiled (the folder was empty), nothing loaded, the files under NUMBA_CACHE_DIR
    ck = cold["kernels"]
    assert sum(k["misses"] for k in ck.values()) >= len(ck) > 0
    assert all(k["hits"] == 0 for k in ck.values())
    assert all(Path(k["cache_path"]).is_relative_to(cache) for k in ck.values())
    assert list(cache.rglob("*.nbi")) and list(cache.rglob("*.nbc"))

    # second process: every signature it needed came from the cache, none compiled
    wk = warm["kernels"]
    modules = {name.rsplit(".", 1)[0] for name in wk}
    assert modules == {f"solver.bsp.kernels.numba.{m}" for m in ("iter", "rk", "scattering", "weno")}, sorted(wk)
    assert set(wk) <= set(ck)
    compiled = {n: k for n, k in wk.items() if k["misses"] or k["hits"] != k["signatures"]}
    assert not compiled, compiled
    # the step's entry kernels among them (BTE and ITER, the kept factorization's substitution)
    for name in ("rk._stage_kernel", "weno._dx_kernel", "scattering._gain_kernel", "scattering._loss_kernel",
                 "iter._eigen_kernel", "iter._frechet_kernel", "iter._cr_eliminate", "iter._resolve_levels",
                 "iter._b_kernel", "iter._density_kernel", "iter._norms_tail_kernel"):
        assert "solver.bsp.kernels.numba." + name in wk, name

    # the cached machine code computes the same bits as the freshly compiled one
    assert cold_state.keys() == warm_state.keys()
    for k in cold_state:
        assert np.array_equal(cold_state[k], warm_state[k]), k
