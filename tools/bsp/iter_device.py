"""One-shot device check and timing of the next ITER pieces (issue #12), docs/performance-iter-next.md.

    python tools/bsp/iter_next_device.py --out DIR          (GPU, CuPy; < 4 minutes on one H200)
    python tools/bsp/iter_next_device.py --out DIR --cpu    (the parts that run on NumPy)

Parts (each caught: a failure is printed and recorded, the next part runs):
  A  accuracy of blocktri_batched.solve_cr_batched on xp (cupy) against blocktri.solve_cr (NumPy)
     and SuperLU (poisson.solve) on Newton systems at NZ = 33, 65, 129, 257: the Frechet blocks of
     the INITCOND state (NX = 17), random SPD blocks (NX = 33), a symmetric indefinite block;
  B  time per solve (median of 20 after warm-up, CuPy events) at NX x NZ = 65x65, 65x129, 129x129,
     33x257: solve_cr_batched (xp.linalg.solve; and cupy.cublas.batched_gesv where NZ > 256, which
     cupy.linalg.solve would loop over on the host), the current CR kernels
     (cuda_blocktri.solve_linsys_cr, NZ <= 127), the dense cuSOLVER system (cuda_iter, 65x129),
     and the two batched pieces of a level (gesv of level 0, GEMM of level 1) to calibrate the model;
  C  cuda_eigen_nr.eigenvalues_nr against cuda_iter.eigenvalues (cold: bitwise; warm after a 1e-3
     change of V: difference / ||T||, Sturm evaluations) and their times.
Writes DIR/iter_next.csv (part, mesh, impl, quantity, value, note) and prints a table last.
"""
from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from solver.backend import get_backend  # noqa: E402
from solver.bsp import blocktri, poisson, schrodinger  # noqa: E402
from solver.bsp.blocktri_batched import cr_batched_counts, solve_cr_batched  # noqa: E402
from solver.bsp.model import Model, load  # noqa: E402
from solver.io import atomic_path  # noqa: E402

NP = get_backend("numpy")
ROWS: list[dict] = []
ACC_NZ = (33, 65, 129, 257)
TIME_MESHES = ((65, 65), (65, 129), (129, 129), (33, 257))
EIG_MESHES = ((65, 65), (65, 129), (129, 129), (33, 257))


def row(part, mesh, impl, quantity, value, note=""):
    ROWS.append(dict(part=part, mesh=mesh, impl=impl, quantity=quantity, value=value, note=note))


def model(NX, NZ, *extra):
    return Model(load(None, [f"mesh.NX={NX}", f"mesh.NZ={NZ}", *extra]))


class Env:
    """xp, transfers and a timer for the GPU (CuPy events) or the CPU (--cpu)."""

    def __init__(self, cpu: bool):
        self.cpu = cpu
        if cpu:
            self.xp, self.backend = np, NP
            self.reps, self.warm = 3, 1
        else:
            import cupy
            self.xp, self.backend = cupy, get_backend("cupy")
            self.reps, self.warm = 20, 3

    def host(self, a):
        return a if self.cpu else self.xp.asnumpy(a)

    def time_ms(self, fn):
        """Median milliseconds of fn() over self.reps calls after self.warm warm-up calls."""
        for _ in range(self.warm):
            fn()
        ts = []
        if self.cpu:
            for _ in range(self.reps):
                t0 = time.perf_counter()
                fn()
                ts.append(1e3 * (time.perf_counter() - t0))
        else:
            cp = self.xp
            start, end = cp.cuda.Event(), cp.cuda.Event()
            for _ in range(self.reps):
                start.record()
                fn()
                end.record()
                end.synchronize()
                ts.append(cp.cuda.get_elapsed_time(start, end))
        return statistics.median(ts)


def run_part(name, fn):
    t0 = time.perf_counter()
    try:
        fn()
    except Exception as exc:  # a failing part must not stop the others
        traceback.print_exc()
        row(name, "", "", "error", float("nan"), f"{type(exc).__name__}: {exc}"[:200])
    print(f"part {name}: {time.perf_counter() - t0:.1f} s", flush=True)


# ---------------------------------------------------------------------- Newton systems
def _spd_F(rng, nxi, nz, scale=20.0):
    B = rng.standard_normal((nxi, 2 * nz, nz))
    c = rng.uniform(0.0, 1.0, (nxi, 2 * nz))
    return scale * np.einsum("iaj,ia,iak->ijk", B, c, B) / nz


def newton_system(m, bc, F, rng, reference=True):
    """(bs, (D, lo, up, b) host arrays, x0 SuperLU or None, bvals)."""
    sysm = poisson.NewtonSystem(m, bc)
    NX, NZ = m.NX, m.NZ
    rhs = rng.standard_normal((NX - 2, NZ - 2))
    bvals = sysm.boundary_values(m, 0.3 + 0.1 * rng.standard_normal(NZ), 0.4 + 0.1 * rng.standard_normal(NZ)).ravel()
    x0 = None
    if reference:
        A, b = poisson.construct(m, NP, sysm, F, rhs, bvals)
        x0 = poisson.solve(m, NP, sysm, A, b)
    bs = blocktri.BlockSystem(sysm)
    return bs, blocktri.construct(np, bs, F, rhs, bvals), x0, bvals, sysm, rhs


_IC: dict = {}


def initcond_state(NZ):
    """INITCOND at NX = 17 on the host (the Frechet blocks of part A, the potential of part C)."""
    if NZ not in _IC:
        m = model(17, NZ)
        _IC[NZ] = (m, poisson.initcond(m, NP))
    return _IC[NZ]


def part_a(env, rng):
    xp = env.xp
    for NZ in ACC_NZ:
        m17, ic = initcond_state(NZ)
        F_phys = poisson.frechet(m17, NP, ic.eps, ic.chi, ic.rho, poisson.fermi_dirac_drho(m17, np, ic.eps))
        m33 = model(33, NZ)
        F_ind = _spd_F(rng, 31, NZ - 2)
        F0 = rng.standard_normal((NZ - 2, NZ - 2))
        F_ind[3] = 5.0 * (F0 + F0.T)  # a symmetric indefinite block: the block LU must pivot
        cases = [("initcond F", m17, bc, F_phys) for bc in ("neumann", "dirichlet")]
        cases += [("random SPD F", m33, "dirichlet", _spd_F(rng, 31, NZ - 2)),
                  ("indefinite F", m33, "dirichlet", F_ind)]
        for label, m, bc, F in cases:
            mesh = f"{m.NX}x{NZ}"
            try:
                bs, (D, lo, up, b), x0, bvals, _, _ = newton_system(m, bc, F, rng)
                x = env.host(solve_cr_batched(xp, *(xp.asarray(a) for a in (D, lo, up, b)), bs.dirichlet)).ravel()
                xc = blocktri.solve_cr(D, lo, up, b, bs.dirichlet).ravel()
                scale = np.abs(x0).max()
                d = bs.dirichlet.ravel()
                note = f"{label}, {bc}"
                row("A", mesh, "solve_cr_batched", "maxrel_vs_superlu", float(np.abs(x - x0).max() / scale), note)
                row("A", mesh, "solve_cr_batched", "maxrel_vs_solve_cr", float(np.abs(x - xc).max() / scale), note)
                row("A", mesh, "solve_cr_batched", "dirichlet_exact", float(np.array_equal(x[d], bvals[d])), note)
                if not env.cpu and NZ > 256:
                    import cupy.cublas
                    xg = env.host(solve_cr_batched(xp, *(xp.asarray(a) for a in (D, lo, up, b)), bs.dirichlet,
                                                   gesv=cupy.cublas.batched_gesv)).ravel()
                    row("A", mesh, "solve_cr_batched+batched_gesv", "maxrel_vs_superlu",
                        float(np.abs(xg - x0).max() / scale), note)
            except Exception as exc:
                traceback.print_exc()
                row("A", mesh, "solve_cr_batched", "error", float("nan"), f"{label}, {bc}: {exc}"[:200])


def part_b(env, rng):
    xp = env.xp
    for NX, NZ in TIME_MESHES:
        mesh = f"{NX}x{NZ}"
        try:
            m = model(NX, NZ)
            F = _spd_F(rng, NX - 2, NZ - 2)
            bs, (D, lo, up, b), _, bvals, sysm, rhs = newton_system(m, "dirichlet", F, rng, reference=False)
            Dd, lod, upd, bd = (xp.asarray(a) for a in (D, lo, up, b))
            dirm = xp.asarray(bs.dirichlet)
            c = cr_batched_counts(NX, NZ)
            flop = sum(lv["getrf"] + lv["getrs"] + lv["gemm"] + lv["back"] for lv in c)
            row("B", mesh, "solve_cr_batched", "model_gflop", flop / 1e9)
            row("B", mesh, "solve_cr_batched", "model_mbytes", sum(lv["bytes"] for lv in c) / 1e6)
            row("B", mesh, "solve_cr_batched", "model_launches", sum(lv["launches"] for lv in c))
            row("B", mesh, "solve_cr_batched", "ms", env.time_ms(lambda: solve_cr_batched(xp, Dd, lod, upd, bd, dirm)))
            if not env.cpu and NZ > 256:
                import cupy.cublas
                g = cupy.cublas.batched_gesv
                row("B", mesh, "solve_cr_batched+batched_gesv", "ms",
                    env.time_ms(lambda: solve_cr_batched(xp, Dd, lod, upd, bd, dirm, gesv=g)))
            # the pieces: the level-0 solve (NX/2 blocks, NZ + 1 rhs) and a level-1 GEMM
            ne0, nk1 = c[0]["n_elim"], c[1]["n_kept"] if len(c) > 2 else 1
            Be = xp.ascontiguousarray(Dd[1::2])
            R0 = xp.concatenate([xp.broadcast_to(xp.eye(NZ), (ne0, NZ, NZ)), bd[1::2, :, None]], axis=2)
            row("B", mesh, "gesv level 0", "ms", env.time_ms(lambda: xp.linalg.solve(Be, R0)),
                f"{ne0} blocks, {NZ + 1} rhs, {ne0 * (2 / 3 * NZ**3 + 2 * NZ**2 * (NZ + 1)) / 1e9:.3f} GFLOP")
            M1 = xp.asarray(rng.standard_normal((nk1, NZ, NZ)))
            X1 = xp.asarray(rng.standard_normal((nk1, NZ, 2 * NZ + 1)))
            row("B", mesh, "gemm level 1", "ms", env.time_ms(lambda: xp.matmul(M1, X1)),
                f"{nk1} x ({NZ},{NZ})@({NZ},{2 * NZ + 1}), {nk1 * 2 * NZ**2 * (2 * NZ + 1) / 1e9:.3f} GFLOP")
            if env.cpu:
                continue
            from solver.bsp.kernels import cuda_blocktri, cuda_iter
            if NZ <= cuda_blocktri.MAX_NZ:
                Ab, bb = cuda_blocktri.construct_linsys(m, env.backend, sysm, xp.asarray(F), xp.asarray(rhs), bvals)
                x_cr = cuda_blocktri.solve_linsys_cr(m, env.backend, sysm, Ab, bb)
                x_b = solve_cr_batched(xp, *Ab, bb, dirm).ravel()
                row("B", mesh, "solve_linsys_cr (current)", "ms",
                    env.time_ms(lambda: cuda_blocktri.solve_linsys_cr(m, env.backend, sysm, Ab, bb)))
                row("B", mesh, "solve_linsys_cr (current)", "maxrel_batched_vs_current",
                    float(xp.abs(x_b - x_cr).max() / xp.abs(x_cr).max()))
            if (NX, NZ) == (65, 129):
                Ad, bdn = cuda_iter.construct_linsys(m, env.backend, sysm, xp.asarray(F), xp.asarray(rhs), bvals)
                x_d = cuda_iter.solve_linsys(m, env.backend, sysm, Ad, bdn)
                x_b = solve_cr_batched(xp, Dd, lod, upd, bd, dirm).ravel()
                row("B", mesh, "dense cuSOLVER (current NZ>127)", "ms",
                    env.time_ms(lambda: cuda_iter.solve_linsys(m, env.backend, sysm, Ad, bdn)))
                row("B", mesh, "dense cuSOLVER (current NZ>127)", "maxrel_batched_vs_dense",
                    float(xp.abs(x_b - x_d).max() / xp.abs(x_d).max()))
                del Ad
        except Exception as exc:
            traceback.print_exc()
            row("B", mesh, "", "error", float("nan"), f"{type(exc).__name__}: {exc}"[:200])


def part_c(env, rng):
    if env.cpu:
        row("C", "", "eigenvalues_nr", "skipped", float("nan"), "needs CuPy (CPU: tests/test_bsp_eigen_nr.py)")
        return
    from solver.bsp.kernels import cuda_eigen_nr, cuda_iter
    xp = env.xp
    for NX, NZ in EIG_MESHES:
        mesh = f"{NX}x{NZ}"
        try:
            m = model(NX, NZ)
            m17, ic = initcond_state(NZ)
            idx = np.round(np.linspace(0, m17.NX - 1, NX)).astype(int)
            Vh = np.ascontiguousarray(ic.V[idx])  # the INITCOND columns spread over NX
            V = xp.asarray(Vh)
            pert = rng.standard_normal(Vh.shape)
            V1 = xp.asarray(np.ascontiguousarray(Vh + 1e-3 * np.abs(Vh).max() * pert))
            tn = max(float(np.abs(schrodinger._kinetic(m, nu)[0]).max()) for nu in range(3)) + float(np.abs(Vh).max())
            e_bis, Dg_bis = cuda_iter.eigenvalues(m, V)
            e_cold, Dg_cold, its_cold = cuda_eigen_nr.eigenvalues_nr(m, V, iterations=True)
            row("C", mesh, "eigenvalues_nr cold", "bitwise_equal_bisection",
                float(bool(xp.array_equal(e_cold, e_bis)) and bool(xp.array_equal(Dg_cold, Dg_bis))))
            row("C", mesh, "eigenvalues_nr cold", "evaluations_mean", float(its_cold.mean()))
            e1_bis, _ = cuda_iter.eigenvalues(m, V1)
            e1, _, its = cuda_eigen_nr.eigenvalues_nr(m, V1, e_bis, iterations=True)
            diff = float(xp.abs(e1 - e1_bis).max())
            row("C", mesh, "eigenvalues_nr warm", "maxdiff_over_Tnorm", diff / tn, "V + 1e-3 max|V| noise")
            row("C", mesh, "eigenvalues_nr warm", "maxdiff_over_maxeps", diff / float(xp.abs(e1_bis).max()))
            row("C", mesh, "eigenvalues_nr warm", "evaluations_mean", float(its.mean()))
            row("C", mesh, "eigenvalues_nr warm", "evaluations_max", float(its.max()))
            e2, _, its2 = cuda_eigen_nr.eigenvalues_nr(m, V1, e1, iterations=True)  # converged start
            row("C", mesh, "eigenvalues_nr warm (converged start)", "evaluations_mean", float(its2.mean()))
            row("C", mesh, "eigenvalues (bisection, current)", "ms", env.time_ms(lambda: cuda_iter.eigenvalues(m, V1)))
            row("C", mesh, "eigenvalues_nr cold", "ms", env.time_ms(lambda: cuda_eigen_nr.eigenvalues_nr(m, V1)))
            row("C", mesh, "eigenvalues_nr warm", "ms", env.time_ms(lambda: cuda_eigen_nr.eigenvalues_nr(m, V1, e_bis)))
            row("C", mesh, "eigenvalues_nr warm (converged start)", "ms",
                env.time_ms(lambda: cuda_eigen_nr.eigenvalues_nr(m, V1, e1)))
        except Exception as exc:
            traceback.print_exc()
            row("C", mesh, "", "error", float("nan"), f"{type(exc).__name__}: {exc}"[:200])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--cpu", action="store_true", help="NumPy only (the parts that run without CuPy)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    env = Env(args.cpu)
    rng = np.random.default_rng(2026)
    for name, part in (("A", part_a), ("B", part_b), ("C", part_c)):
        run_part(name, lambda: part(env, rng))
    out = Path(args.out) / "iter_next.csv"
    with atomic_path(out) as tmp:
        with open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["part", "mesh", "impl", "quantity", "value", "note"])
            w.writeheader()
            w.writerows(ROWS)
    print(f"\nwrote {out} ({len(ROWS)} rows) in {time.perf_counter() - t0:.0f} s "
          f"({'cpu/numpy' if args.cpu else 'gpu/cupy'})\n")
    print(f"{'part':4} {'mesh':8} {'impl':38} {'quantity':28} {'value':>12}  note")
    for r in ROWS:
        v = r["value"]
        print(f"{r['part']:4} {r['mesh']:8} {r['impl']:38} {r['quantity']:28} {v:12.4g}  {r['note']}")


if __name__ == "__main__":
    main()
