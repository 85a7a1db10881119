"""The Newton systems of Table 2 of paper 000: captured from a real run of the solver, stored in
and loaded from HDF5 (``systems.h5`` beside the table, not committed)."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def capture_systems(cfg_path=None, overrides=(), steps: int = 2, backend: str = "numpy") -> list[dict]:
    """Run the solver (reference NumPy path) for ``steps`` time steps and return every linear
    system it solved: dicts with A (CSR), b, x (the sparse-LU solution the solver used), x_bc,
    step (0 = start-up: INITCOND with Neumann, THERMEQUIL with Dirichlet rows) and the call index.
    The solver's own ``poisson.solve_linsys`` is wrapped (not changed): the systems are the real ones."""
    from solver.backend import get_backend
    from solver.bsp import poisson
    from solver.bsp.model import load
    from solver.bsp.simulation import Simulation

    cfg = load(cfg_path, list(overrides) + [f"time.steps={int(steps)}", "time.t_end_ps=null",
                                            f"numerics.backend={backend}", "output.checkpoint_every_steps=0"])
    be = get_backend(backend)
    label = {"step": 0}
    out: list[dict] = []
    orig_solve = poisson.solve_linsys

    def recording_solve(model, backend_, sysm, A, b, reuse=False):
        x = orig_solve(model, backend_, sysm, A, b, reuse)
        out.append({"A": sp.csr_matrix(A, copy=True), "b": np.array(backend_.to_numpy(b), dtype=float),
                    "x": np.array(backend_.to_numpy(x), dtype=float), "x_bc": sysm.x_bc,
                    "step": label["step"], "call": len(out)})
        return x

    sim = Simulation(cfg, backend=be, progress=False)
    orig_step = sim.step

    def counting_step():
        label["step"] += 1
        return orig_step()

    sim.step = counting_step
    poisson.solve_linsys = recording_solve
    try:
        sim.run(resume=False)
    finally:
        poisson.solve_linsys = orig_solve
    for s in out:
        s["A"].sort_indices()
    return out


def save_systems(path, systems, attrs: dict | None = None) -> None:
    """Systems to one HDF5 file (solver.io.write_hdf5, atomic; *.h5 is not committed); patterns
    shared between systems are stored once."""
    from solver import io

    arrays, pats = {}, []
    for i, s in enumerate(systems):
        A = s["A"]
        key = None
        for j, (ip, ix) in enumerate(pats):
            if ip.size == A.indptr.size and np.array_equal(ip, A.indptr) and np.array_equal(ix, A.indices):
                key = j
                break
        if key is None:
            pats.append((A.indptr.copy(), A.indices.copy()))
            key = len(pats) - 1
        arrays[f"data_{i}"] = A.data
        arrays[f"b_{i}"] = s["b"]
        arrays[f"x_{i}"] = s["x"]
        arrays[f"pattern_{i}"] = np.array(key)
    for j, (ip, ix) in enumerate(pats):
        arrays[f"indptr_p{j}"] = ip
        arrays[f"indices_p{j}"] = ix
    arrays["step"] = np.array([s["step"] for s in systems])
    arrays["call"] = np.array([s["call"] for s in systems])
    arrays["x_bc"] = np.array([s["x_bc"] for s in systems], dtype="S")
    arrays["n"] = np.array(systems[0]["A"].shape[0] if systems else 0)
    io.write_hdf5(path, arrays, attrs or {})


def systems_key(path) -> str | None:
    """The config hash a systems file was captured with (None for files without one)."""
    import h5py

    with h5py.File(path, "r") as z:
        v = z.attrs.get("config_hash")
    return v.decode() if isinstance(v, bytes) else v


def load_systems(path) -> list[dict]:
    import h5py

    with h5py.File(path, "r") as z:
        n = int(z["n"][()])
        steps, calls, bcs = z["step"][()], z["call"][()], z["x_bc"][()]
        out = []
        for i in range(steps.size):
            k = int(z[f"pattern_{i}"][()])
            A = sp.csr_matrix((z[f"data_{i}"][()], z[f"indices_p{k}"][()], z[f"indptr_p{k}"][()]), shape=(n, n))
            out.append({"A": A, "b": z[f"b_{i}"][()], "x": z[f"x_{i}"][()], "x_bc": bcs[i].decode(),
                        "step": int(steps[i]), "call": int(calls[i])})
    return out
