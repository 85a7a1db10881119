"""The paper's four-step recursive Green's function (Fig. 1 of Jeong & Ryu 2021).

A = (E + i eta) I - H - Sigma is block tridiagonal with N = 4 X-UC blocks; the top half (blocks
0..m-1) and the bottom half (m..N-1), m = N // 2, are the paper's two MPI processes.

- step 1: forward sweeps: left-connected gL_i in the top half (0 -> m-1), right-connected gR_i in
  the bottom half (N-1 -> m).
- step 2: exchange gL_{m-1} and gR_m; the full G_{m-1,m-1} and G_{m,m}.
- step 3: backward sweeps: diagonal blocks G_ii and, column by column (i-loop), the off-diagonal
  blocks of the half (j-loop): top G_{j,i} = -G_{j,i+1} A_{i+1,i} gL_i (j > i), bottom
  G_{j,i} = -G_{j,i-1} A_{i-1,i} gR_i (j < i).  ``offdiag='all'`` computes every row j (the
  paper's cost, ~ (N/2)^2 products per half); ``offdiag='row'`` only the row step 4 needs.
- step 4: first and last block columns: G_{m-1,0} goes down, G_{m,N-1} goes up, giving G_{N-1,0}
  and G_{0,N-1}.

T_LR = Tr[Gamma_L G_{0,N-1} Gamma_R G_{0,N-1}^+], T_RL = Tr[Gamma_R G_{N-1,0} Gamma_L G_{N-1,0}^+],
LDOS_i = -Im Tr G_ii / pi (states / eV per layer, spin included when spin-orbit is on).

Block algebra is pluggable (``Ops``): complex NumPy / CuPy (BLAS, cuBLAS), or the optimization
cases of ``solver.rgf.kernels`` (numba AoS / SoA / tiled / scheduled, CUDA tiled kernel).
"""
from __future__ import annotations

import numpy as np

from solver.rgf.leads import _H, inv, self_energies


class ComplexOps:
    """Complex arrays on ``xp`` (NumPy: LAPACK/BLAS; CuPy: cuSOLVER/cuBLAS)."""

    name = "blas"

    def __init__(self, xp=np):
        self.xp = xp

    def to(self, a):
        return self.xp.asarray(a, dtype=complex)

    def back(self, a):
        return a.get() if hasattr(a, "get") else np.asarray(a)

    def mul(self, a, b):
        return a @ b

    def mul_many(self, As, b):
        return [a @ b for a in As]

    def inv(self, a):
        return self.xp.linalg.inv(a)

    def trace(self, a):
        return complex(self.xp.trace(a))

    def sync(self):
        if self.xp is not np:
            self.xp.cuda.get_current_stream().synchronize()


class BatchedOps(ComplexOps):
    """Stacks (nE, n, n) over energies: one batched call per block operation (strided-batched
    GEMM through ``matmul``; inverses via :func:`solver.rgf.leads.inv`).  The couplings are
    energy-independent n x n blocks that broadcast.  ``trace`` gives an (nE,) array."""

    name = "batched"

    def mul_many(self, As, b):
        return [a @ b for a in As]

    def inv(self, a):
        return inv(self.xp, a)

    def trace(self, a):
        return self.xp.trace(a, axis1=a.ndim - 2, axis2=a.ndim - 1)


class _NullTimer:
    from contextlib import nullcontext as _nc

    def phase(self, name):
        return self._nc()


def rgf_blocks(ops, Ad, Au, Al, N, offdiag="row", timer=None):
    """Four-step RGF on the block-tridiagonal A given by callables (in ops format):
    Ad(i) = A_ii, Au(i) = A_{i,i+1}, Al(i) = A_{i+1,i}.  Returns dict with G_0N (= G_{0,N-1}),
    G_N0, trace_diag (list of Tr G_ii), n_products (step-3 multiplications)."""
    t = timer or _NullTimer()
    m = N // 2
    if N < 2:
        raise ValueError("RGF needs at least 2 blocks")
    gL, gR = [None] * N, [None] * N
    n3 = 0
    with t.phase("step1"):
        M = Ad(0)
        gL[0] = ops.inv(M)
        ML = M
        for i in range(1, m):
            ML = Ad(i) - ops.mul(ops.mul(Al(i - 1), gL[i - 1]), Au(i - 1))
            gL[i] = ops.inv(ML)
        MR = Ad(N - 1)
        gR[N - 1] = ops.inv(MR)
        for i in range(N - 2, m - 1, -1):
            MR = Ad(i) - ops.mul(ops.mul(Au(i), gR[i + 1]), Al(i))
            gR[i] = ops.inv(MR)
        ops.sync()
    with t.phase("step2"):
        a = m - 1
        Gtop = ops.inv(ML - ops.mul(ops.mul(Au(a), gR[m]), Al(a)))  # G_{m-1,m-1}
        Gbot = ops.inv(MR - ops.mul(ops.mul(Al(a), gL[a]), Au(a)))  # G_{m,m}
        ops.sync()
    diag = [None] * N
    diag[a], diag[m] = ops.trace(Gtop), ops.trace(Gbot)
    with t.phase("step3"):
        # top half: column i from m-2 down to 0; col[j] = G_{j,i} for j = i..m-1 (j = i is G_ii)
        Gii = Gtop
        col = {a: Gtop}
        for i in range(m - 2, -1, -1):
            X = ops.mul(Al(i), gL[i])  # A_{i+1,i} gL_i
            Y = ops.mul(gL[i], Au(i))  # gL_i A_{i,i+1}
            rows = list(range(i + 1, m)) if offdiag == "all" else [m - 1]
            prods = ops.mul_many([col[j] for j in rows], X)
            n3 += len(rows)
            Gii = gL[i] + ops.mul(ops.mul(Y, Gii), X)
            col = {j: -p for j, p in zip(rows, prods)}
            col[i] = Gii
            diag[i] = ops.trace(Gii)
        G_m0 = col[a]  # G_{m-1,0}
        # bottom half: column i from m+1 up to N-1; col[j] = G_{j,i} for j = m..i
        Gii = Gbot
        colb = {m: Gbot}
        for i in range(m + 1, N):
            X = ops.mul(Au(i - 1), gR[i])  # A_{i-1,i} gR_i
            Y = ops.mul(gR[i], Al(i - 1))  # gR_i A_{i,i-1}
            rows = list(range(m, i)) if offdiag == "all" else [m]
            prods = ops.mul_many([colb[j] for j in rows], X)
            n3 += len(rows)
            Gii = gR[i] + ops.mul(ops.mul(Y, Gii), X)
            colb = {j: -p for j, p in zip(rows, prods)}
            colb[i] = Gii
            diag[i] = ops.trace(Gii)
        G_mN = colb[m]  # G_{m,N-1}
        ops.sync()
    with t.phase("step4"):
        # first column downwards through the bottom half: G_{i,0} = -gR_i A_{i,i-1} G_{i-1,0}
        Gi0 = G_m0
        for i in range(m, N):
            Gi0 = -ops.mul(gR[i], ops.mul(Al(i - 1), Gi0))
        # last column upwards through the top half: G_{i,N-1} = -gL_i A_{i,i+1} G_{i+1,N-1}
        GiN = G_mN
        for i in range(m - 1, -1, -1):
            GiN = -ops.mul(gL[i], ops.mul(Au(i), GiN))
        ops.sync()
    return {"G_0N": GiN, "G_N0": Gi0, "trace_diag": diag, "n_products": n3}


class Device:
    """A wire of ``n_cells`` cubic cells between two semi-infinite leads of the same wire."""

    def __init__(self, wire, n_cells, eta=1e-6):
        self.wire = wire
        self.n_cells = int(n_cells)
        self.N = 4 * self.n_cells
        self.eta = eta

    def self_energies(self, Ez, xp=np):
        """(Sigma_L, Sigma_R) at complex energies Ez (scalar, or (nE, 1, 1) array for a stack);
        they depend on the cross-section only, so wires of several lengths share them."""
        w = self.wire
        D = [xp.asarray(d, dtype=complex) for d in w.D]
        C = [xp.asarray(c, dtype=complex) for c in w.C]
        return self_energies(xp, Ez, D, C)

    def solve(self, E, ops=None, offdiag="row", timer=None, lead_xp=None, sigmas=None):
        """T_LR, T_RL and the LDOS per layer at one energy (a float), or at a batch of energies
        (a 1-D array, with ``BatchedOps``: every result then has a leading energy axis)."""
        ops = ops or ComplexOps(np)
        t = timer or _NullTimer()
        w = self.wire
        xp = lead_xp or (ops.xp if isinstance(ops, ComplexOps) else np)
        batched = np.ndim(E) > 0
        Ez = (np.asarray(E, dtype=float) + 1j * self.eta).reshape(-1, 1, 1) if batched else complex(E, self.eta)
        if batched:
            Ez = xp.asarray(Ez)
        with t.phase("leads"):
            sigL, sigR = sigmas if sigmas is not None else self.self_energies(Ez, xp)
            D = [xp.asarray(d, dtype=complex) for d in w.D]
            C = [xp.asarray(c, dtype=complex) for c in w.C]
            I = xp.eye(w.block_size, dtype=complex)
            Adiag = [Ez * I - d for d in D]
            same = isinstance(ops, ComplexOps) and ops.xp is xp  # no host round trip
            h = lambda a: a if same or not hasattr(a, "get") else a.get()  # noqa: E731
            Ad_t = [ops.to(h(a)) for a in Adiag]
            Ad_first = ops.to(h(Adiag[0] - sigL))
            Ad_last = ops.to(h(Adiag[3] - sigR))
            Au_t = [ops.to(h(-c)) for c in C]
            Al_t = [ops.to(h(-_H(c))) for c in C]
            gamL = 1j * (sigL - _H(sigL))
            gamR = 1j * (sigR - _H(sigR))
        N = self.N

        def Ad(i):
            if i == 0:
                return Ad_first
            if i == N - 1:
                return Ad_last
            return Ad_t[i % 4]

        out = rgf_blocks(ops, Ad, lambda i: Au_t[i % 4], lambda i: Al_t[i % 4], N, offdiag, t)
        G1N = xp.asarray(ops.back(out["G_0N"]))
        GN1 = xp.asarray(ops.back(out["G_N0"]))
        tr = lambda a: xp.trace(a, axis1=a.ndim - 2, axis2=a.ndim - 1)  # noqa: E731
        TLR = tr(gamL @ G1N @ gamR @ _H(G1N))
        TRL = tr(gamR @ GN1 @ gamL @ _H(GN1))
        if batched:
            TLR, TRL = ops.back(TLR), ops.back(TRL)
            ldos = -np.imag(np.stack([ops.back(d) for d in out["trace_diag"]], axis=-1)) / np.pi  # (nE, N)
            return {"E": np.asarray(E), "T_LR": TLR.real, "T_RL": TRL.real, "T_imag": np.abs(TLR.imag),
                    "ldos_layers": ldos, "ldos": ldos.sum(axis=-1), "n_products": out["n_products"]}
        TLR, TRL = complex(TLR), complex(TRL)
        ldos = -np.imag(np.array(out["trace_diag"])) / np.pi
        return {"E": E, "T_LR": TLR.real, "T_RL": TRL.real, "T_imag": abs(TLR.imag),
                "ldos_layers": ldos, "ldos": float(ldos.sum()), "n_products": out["n_products"]}


def dense_reference(wire, n_cells, E, eta=1e-6):
    """Dense inverse of the whole device (small wires only): T_LR and the LDOS per layer."""
    from scipy.linalg import block_diag  # noqa: F401

    xp = np
    n = wire.block_size
    N = 4 * n_cells
    D = [d.astype(complex) for d in wire.D]
    C = [c.astype(complex) for c in wire.C]
    Ez = complex(E, eta)
    sigL, sigR = self_energies(xp, Ez, D, C)
    A = np.zeros((N * n, N * n), complex)
    for i in range(N):
        A[i * n:(i + 1) * n, i * n:(i + 1) * n] = Ez * np.eye(n) - D[i % 4]
        if i < N - 1:
            A[i * n:(i + 1) * n, (i + 1) * n:(i + 2) * n] = -C[i % 4]
            A[(i + 1) * n:(i + 2) * n, i * n:(i + 1) * n] = -C[i % 4].conj().T
    A[:n, :n] -= sigL
    A[-n:, -n:] -= sigR
    G = np.linalg.inv(A)
    g1N = G[:n, -n:]
    gamL, gamR = 1j * (sigL - sigL.conj().T), 1j * (sigR - sigR.conj().T)
    T = np.trace(gamL @ g1N @ gamR @ g1N.conj().T).real
    ldos = np.array([-np.trace(G[i * n:(i + 1) * n, i * n:(i + 1) * n]).imag / np.pi for i in range(N)])
    return {"T_LR": T, "ldos_layers": ldos}
