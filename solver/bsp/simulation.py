"""The BSP time loop (physics.md §7-§8): start-up (INITCOND, THERMEQUIL, equilibrium BTE state),
TVD-RK3 steps with the Schroedinger-Poisson block re-solved after every stage, the adaptive CFL
time step, outputs at a cadence, checkpoint and resume, phase timers named as in the papers.

Each RK stage: overlap W from the current chi; BTE right-hand side (WENO x, w, phi and
scattering gain/loss) on the stage data; RK update; DENS; ITER (POTENTIAL); d eps/dx.  (With the
RK fast path, bte.advance forms DENS inside the RK update.)
"""
from __future__ import annotations

import contextlib
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from solver import io, provenance
from solver.backend import get_backend
from solver.bsp import bte, dens, output, poisson, scattering, schrodinger, steady
from solver.bsp import kernels
from solver.bsp.model import Model, check_memory, gate_volts
from solver.config import ConfigError, Interrupted, RunFault, SourceFaulted
from solver.timing import PhaseTimer

if TYPE_CHECKING:  # pandas is imported where tables are written (start-up: docs/performance-startup.md)
    import pandas as pd

CHECKPOINT = "checkpoint.h5"
FINAL_STATE = "final_state.h5"  # continuation.save_final_state: the last step's checkpoint, for --init-from
SNAPSHOTS = "snapshots"
# continuation with a bias ramp: a negative-density fault during the ramp (or within one ramp time
# after it) restarts the run from its source with twice the ramp time, at most this many times
# (docs/iv.md §8: a fast ramp to a low gate voltage depletes the channel below the quasi-static
# density for a moment; summary.continuation records the ramp used and the faults)
RAMP_RETRIES = 3
# what a run writes into its folder (cleaned by --overwrite); quicklook.png is the main job's figure
RUN_FILES = (CHECKPOINT, FINAL_STATE, "run.json", "profiles.csv", "profiles_t0.csv", "scalars.csv", "timers.csv",
             "fields.h5", "quicklook.png")
ETA_AFTER_STEPS = 3  # steps timed (after the first, which compiles and warms up) before an ETA is given
STATE_ARRAYS = ("Phi", "V", "eps", "chi", "deps_dx")
DENS_ARRAYS = ("rho", "PhiHat")  # DENS of Phi, stored as the run computed them


@dataclass
class State:
    """Everything that carries from one step to the next (backend arrays + scalars)."""
    Phi: object
    V: object
    eps: object
    chi: object
    deps_dx: object
    step: int = 0
    t: float = 0.0  # dimensionless time
    A_eps: float = 0.0
    newton_iterations: int = 0  # of the last step
    # derived from Phi by DENS (checkpointed as computed: the RK fast path forms them in its own
    # summation order, so recomputing them on resume would not be bitwise the same)
    rho: object = None
    PhiHat: object = None
    N: object = None


@dataclass
class Equilibrium:
    """Start-up data that stays fixed: V_b(z), rho^eq(x) (THERMEQUIL), the constant A."""
    V_b: object
    rho_eq: object
    A: float
    initcond_iterations: int
    thermequil_iterations: int


class Simulation:
    def __init__(self, cfg: dict, backend=None, out_dir=None, progress: bool | None = None, log=sys.stderr):
        self.cfg = cfg
        self.model = Model(cfg)
        nm = cfg["numerics"]
        self.backend = backend or get_backend(nm["backend"], nm["threads"])
        check_memory(cfg, self.backend)
        self.xp = self.backend.xp
        self.out = Path(out_dir) if out_dir is not None else None
        self.progress = cfg["output"]["progress"] if progress is None else progress
        self.log = log
        self.timer = PhaseTimer(self.backend)
        self._defer_check = self.backend.is_gpu  # the stage's density check read with ITER's (_check_density)
        self._speculate = kernels.bte_speculate(self.model, self.backend)  # numerics.bte_speculate (_Speculation)
        self.speculation = {"bte_speculated": 0, "bte_speculation_dropped": 0}
        self.startup_timer = PhaseTimer(self.backend)
        self.scalars: list[dict] = []
        self._frames: dict = {}  # the tables' frames as the last checkpoint wrote them (_grown_frame)
        self.state: State | None = None
        self.eq: Equilibrium | None = None
        self.startup_s = 0.0
        s = self.model.scales
        t_end = cfg["time"]["t_end_ps"]
        self.t_end = math.inf if t_end is None else t_end * 1e-12 / s.t
        self.max_steps = cfg["time"]["steps"]
        self.first_dt = cfg["time"]["first_dt_s"] / s.t
        self.monitor = None
        if cfg["steady"]["enabled"]:
            self.monitor = steady.Monitor(self.model, cfg["steady"], self._earliest_s(cfg["continuation"]["ramp_ps"]))
        self.source = None  # continuation: what the run started from (init_from)

    def _earliest_s(self, ramp_ps) -> float:
        """The steady-state tests start a window after the ramp (s of simulated time)."""
        ramping = self.cfg["continuation"]["init_from"] and ramp_ps > 0
        return (ramp_ps + self.cfg["steady"]["window_ps"]) * 1e-12 if ramping else 0.0

    # ------------------------------------------------------------------ start-up
    def startup(self) -> None:
        m, be = self.model, self.backend
        t0 = time.perf_counter()
        tm = self.startup_timer
        kernels.precompile(m, be)  # cupy: the start-up's CUDA modules and CuPy kernels, in parallel threads
        with tm.phase("startup"):
            with tm.phase("INITCOND"):
                ic = poisson.initcond(m, be, timer=tm)
            V_b = ic.V[0].copy()
            with tm.phase("THERMEQUIL"):
                te = poisson.thermequil(m, be, V_b, timer=tm)
            rho_eq = te.rho
            with tm.phase("BTE_init"):
                Phi = bte.initial_phi(m, be, rho_eq, m.on(be, "s_w"), m.on(be, "maxwellian"), m.NPHI)
            deps, A_eps, _ = schrodinger.deps_dx_max(m, be, te.eps, te.V)
        tm.end_step()
        self.eq = Equilibrium(V_b=V_b, rho_eq=rho_eq, A=float(te.A),
                              initcond_iterations=int(ic.iterations), thermequil_iterations=int(te.iterations))
        self.state = State(Phi=Phi, V=te.V, eps=te.eps, chi=te.chi, deps_dx=deps, A_eps=A_eps)
        self._iter = te  # eigenpairs of te.V: the next POTENTIAL call starts from them
        self._dens(self.state)
        self.startup_s = time.perf_counter() - t0

    def _dens(self, st: State) -> None:
        st.rho, st.PhiHat = dens.dens(self.model, self.backend, st.Phi)

    # ------------------------------------------------------------------ one step
    def next_dt(self) -> float:
        st = self.state
        if st.step == 0:
            dt = self.first_dt
        else:
            dt = self.cfg["time"]["cfl"] * self.model.dt_max(st.A_eps)
        return min(dt, self.t_end - st.t)

    def stage_data(self, st: State, W):
        return bte.StageData(
            eps=st.eps, deps_dx=st.deps_dx, W=W, PhiHat=st.PhiHat, rho=st.rho,
            rho_eq=self.eq.rho_eq, A_eps=st.A_eps)

    def step(self) -> None:
        m, be, xp, tm = self.model, self.backend, self.xp, self.timer
        st = self.state
        dt = self.next_dt()
        if self.source is not None:
            self._ramp_bias(st.t + dt)
        Phi0 = st.Phi
        Phi = Phi0
        V_n = st.V
        stage_V = []
        newton = 0
        # numerics.iter_jacobian = step: the kept Jacobian, evaluated afresh every iter_jacobian_steps steps and
        # after a step that took more than one Newton iteration per stage plus one (poisson.KEEP_MAX_NEWTON)
        keep = st.step % self.cfg["numerics"]["iter_jacobian_steps"] and st.newton_iterations <= poisson.KEEP_MAX_NEWTON
        jacobian = getattr(self, "_jacobian", None) if keep else None
        ahead = None  # (Phi, dens) of this stage's BTE, launched inside the last stage's ITER (_Speculation)
        with tm.phase("step"), contextlib.ExitStack() as joins:
            for s in range(3):
                early = self._iter_early(s, jacobian)  # numerics.iter_overlap: its ready mark before the BTE
                if early is not None:  # whatever fails in the stage: the side stream joined, nothing pending
                    joins.callback(early.close)
                if ahead is not None:
                    Phi, dn = ahead
                else:
                    with tm.phase("BTE"):
                        with tm.phase("overlap"):
                            W = scattering.overlap(m, be, st.chi)
                        Phi, dn = bte.advance(m, be, s, Phi0, Phi, self.stage_data(st, W), dt, timer=tm,
                                              dx=self._take_dx(st))
                if early is not None:  # the start and its eigenpairs on the side stream, during the BTE
                    V_early = early.launch(lambda: self._iter_start(s, V_n, stage_V, dt), self._iter.eps, tm)
                st.Phi = Phi
                with tm.phase("DENS"):
                    if dn is None:
                        self._dens(st)
                    else:  # formed by the RK fast path
                        st.rho, st.PhiHat = dn
                probe = self._density_probe(st)
                if not self._defer_check:
                    self._check_density(st, s, probe)
                self._launch_dx(st)
                with tm.phase("ITER"):
                    if early is None:
                        V_start = self._iter_start(s, V_n, stage_V, dt)
                    else:  # ITER's launches (whichever path it takes) after the side stream's writes
                        V_start = V_early
                        early.join()
                    spec = _Speculation(self, s + 1, Phi0, dt) if s < 2 and self._speculating() else None
                    try:
                        res = poisson.potential(m, be, st.V, st.rho, self.eq.V_b, timer=tm,
                                                state=getattr(self, "_iter", None), V_start=V_start,
                                                jacobian=jacobian, tail=True, before_read=spec)
                    except Exception as exc:
                        if self._defer_check:  # a fault of the stage's density comes first
                            self._check_density(st, s, probe)
                        if isinstance(exc, poisson.ConvergenceError):
                            raise self._fault(s, "ITER", f"Newton failed ({exc})") from None
                        raise
                    finally:
                        if early is not None:  # the early eigenpairs serve this stage's start only
                            early.close()
                    if self._defer_check:  # read with ITER's own host read: no wait of its own
                        self._check_density(st, s, probe)
                    tail = res.tail  # formed with the last Newton norms (one host read; cupy: newton_norms_tail)
                    if tail is None:
                        with tm.phase("deps_dx"):  # d eps/dx, A_eps and the finite check of V: one host read
                            tail = schrodinger.deps_dx_max(m, be, res.eps, res.V)
                    deps, A_eps, finite_V = tail
                    if not finite_V:
                        raise self._fault(s, "ITER", "the potential V holds NaN or Inf")
                    self._iter = res
                    jacobian = res.jacobian
                    st.V, st.eps, st.chi, st.N = res.V, res.eps, res.chi, res.N
                    st.deps_dx, st.A_eps = deps, A_eps
                    stage_V.append(res.V)
                    newton += int(res.iterations)
                    ahead = None if spec is None else spec.take(res)
        self._jacobian = jacobian
        st.step += 1
        st.t += dt
        st.newton_iterations = newton
        self._last_dt = dt
        # V^n and V^(1) of this step for the next step's predictions: POTENTIAL solutions only
        self._V_last = (V_n, stage_V[0]) if st.step > 1 else None
        step_times = tm.end_step()
        self._timer_rows.extend({"step": st.step, "phase": k, "seconds": v} for k, v in step_times.items())

    def _iter_start(self, s: int, V_n, stage_V: list, dt: float):
        """numerics.iter_start = extrapolate: the start of RK stage ``s``'s POTENTIAL Newton,
        predicted from this step's stages and the last step's (docs/performance-iter-start.md), by
        poisson.iter_start (cupy: one launch; the last step's d_o formed once per step).
        With V taken affine in the BTE state u over a step, V' = dV/dt along the flow, and
        TVD-RK3's stages u^(1) = u^n + dt L(u^n), u^(2) = 3/4 u^n + 1/4 (u^(1) + dt L(u^(1))),
        u^(3) = 1/3 u^n + 2/3 (u^(2) + dt L(u^(2))):

            V^(1) = V^n + dt V'(t_n),  V'(t_n) ~ 2 (V^n - V^(n-1)) / dt_o - V'(t_(n-1))
            V^(2) = (V^n + V^(1)) / 2 + dt^2 / 4 V''
            V^(3) = 2/3 (V^(1) + V^(2)) - 1/3 V^n + dt^2 / 3 V''

        with V'(t_(n-1)) = (V^(1)_o - V^(n-1)) / dt_o and V'(t_n) = (V^(1) - V^n) / dt from the
        stages, V'' = (V'(t_n) - V'(t_(n-1))) / dt_o; "o" is the last step.  Without a last step
        stage 1 keeps the reference start and stages 2-3 drop the V'' terms.  None (start from the
        last stage's V, the reference) for numerics.iter_start = previous, and on the first step
        (V^n is then the equilibrium: THERMEQUIL's, or a continuation source's at another bias)."""
        if self.cfg["numerics"]["iter_start"] == "previous" or self.state.step < 1:
            return None
        return poisson.iter_start(self.model, self.backend, s, V_n, stage_V, self._last_step(), dt)

    def _speculating(self) -> bool:
        """numerics.bte_speculate for this stage: where the last ITER took one Newton iteration (the launch is
        used only when the first iteration is the last; after a stage that took more it would likely be dropped,
        a stage's BTE of GPU work wasted)."""
        last = getattr(self, "_iter", None)
        return self._speculate and last is not None and last.iterations == 1

    def _iter_early(self, s: int, jacobian):
        """numerics.iter_overlap: poisson.iter_prologue's handle for RK stage ``s`` (its ready mark
        recorded now, before the BTE's launches), or None where ITER is to start as without it: no
        prediction (numerics.iter_start = previous, the first step, stage 1 of the second step), no
        kept Jacobian (a fresh one is evaluated in ITER), no last stage's levels, or no fast path."""
        last_res = getattr(self, "_iter", None)
        if (jacobian is None or last_res is None or self.cfg["numerics"]["iter_start"] == "previous"
                or self.state.step < 1 or (s == 0 and self._last_step() is None)):
            return None
        return poisson.iter_prologue(self.model, self.backend, jacobian, last_res.eps)

    def _last_step(self):
        """poisson.LastStep of the last step's V^n and V^(1) (self._V_last) and dt, one per step (its
        d_o formed once), or None."""
        last = getattr(self, "_V_last", None)
        if last is None:
            return None
        kept = getattr(self, "_last_step_kept", None)
        if kept is None or kept[0] is not last or kept[1] != self._last_dt:
            kept = self._last_step_kept = (last, self._last_dt, poisson.LastStep(last[0], last[1], self._last_dt))
        return kept[2]

    # ------------------------------------------------------------------ faults
    def _density_probe(self, st: State):
        """The two numbers _check_density needs (sum and minimum of N_s(x)), on their way to the host
        (dens.density_probe; cupy: one launch)."""
        return dens.density_probe(self.model, self.backend, st.rho)

    def _check_density(self, st: State, stage: int, probe=None) -> None:
        """NaN or Inf in Phi reaches rho = DENS(Phi) (a weighted sum over w and phi), so the small
        rho is checked every stage and the big Phi only to tell which phase failed.  Single subband
        densities dip slightly below zero in healthy runs (WENO undershoots, -3e-6 on a 3x9x13x12x8
        mesh), so the fault is a negative total density N_s(x) (all valleys and subbands).
        ``probe``: _density_probe of this stage (None: taken now).  On the GPU (``_defer_check``)
        the check is read after the stage's ITER, whose host read has waited for the GPU anyway:
        a separate read here would leave the GPU idle while the host prepares ITER (the BTE's GPU
        work hides that host time instead).  A faulty density is then still reported as the
        stage's DENS or BTE fault, before any ITER result is used; only ITER's work is wasted."""
        xp = self.xp
        values = probe if probe is not None else self._density_probe(st)
        rho_sum, low = (float(v) for v in values.result())
        if not math.isfinite(rho_sum):  # one host read per stage for both checks
            if not math.isfinite(float(xp.sum(st.Phi))):
                raise self._fault(stage, "BTE", "Phi holds NaN or Inf")
            raise self._fault(stage, "DENS", "the density rho holds NaN or Inf")
        if low < 0:
            i = int(xp.argmin(st.rho.sum(axis=(1, 2))))
            raise self._fault(stage, "DENS", f"negative density (N_s summed over valleys and subbands = {low:.3e} "
                                             f"at x node {i})")

    def _fault(self, stage: int, phase: str, what: str) -> RunFault:
        """The error that stops a run; the last checkpoint written stays where it is.  It carries
        ``step`` (the step that failed) and ``phase`` (BTE, DENS or ITER)."""
        ck = self.out / CHECKPOINT if self.out is not None else None
        if ck is not None and ck.exists():
            step = getattr(self, "_checkpoint_step", None)  # None: a checkpoint this process did not write or read
            kept = (f"the last good checkpoint {ck}" + ("" if step is None else f" (step {step})")
                    + " is kept: the same command resumes from it")
        else:
            kept = "no checkpoint was written yet (output.checkpoint_every_steps, checkpoint_every_s)"
        err = RunFault(f"step {self.state.step + 1}, RK stage {stage + 1}, phase {phase}: {what}; {kept}")
        err.step, err.phase = self.state.step + 1, phase  # read by _write_fault_record (output.on_fault = record)
        return err

    # ------------------------------------------------------------------ overlap (paper 000 §3.4)
    def _launch_dx(self, st: State) -> None:
        """numerics.overlap on the GPU: enqueue the next stage's WENO_x (it needs Phi, rho and
        rho_eq only) on a second stream, so that it runs while ITER does; timed as the phase
        ``WENO_x_overlapped`` by events on that stream."""
        if not (self.cfg["numerics"].get("overlap") and self.backend.is_gpu):
            return
        cp = self.xp
        if getattr(self, "_side", None) is None:
            self._side = cp.cuda.Stream(non_blocking=True)
        ready = cp.cuda.Event()
        ready.record()  # Phi and rho of this stage are complete on the current stream
        self._side.wait_event(ready)
        sd = bte.StageData(eps=None, deps_dx=None, W=None, PhiHat=None, rho=st.rho,
                           rho_eq=self.eq.rho_eq, A_eps=None)
        with self._side, self.timer.phase("WENO_x_overlapped"):
            dx = bte.x_term(self.model, self.backend, st.Phi, sd)
        done = cp.cuda.Event()
        done.record(self._side)
        self._pending_dx = (dx, done, st.Phi, st.rho)

    def _take_dx(self, st: State):
        """The x term launched by _launch_dx when it belongs to this Phi and rho, else None."""
        pend = getattr(self, "_pending_dx", None)
        self._pending_dx = None
        if pend is None:
            return None
        dx, done, Phi, rho = pend
        if Phi is not st.Phi or rho is not st.rho:
            return None
        self.xp.cuda.get_current_stream().wait_event(done)
        return dx

    # ------------------------------------------------------------------ outputs
    def scalar_fields(self, st: State) -> dict:
        """What a scalars row and the steady monitor read (output.scalars_row, steady.Monitor.update):
        ``rho_x`` and ``j_x``, rho and j_sub summed over valleys and subbands (NX each), and ``contact``
        (output.contact_lines), formed on the backend and read in one transfer (dens.scalars_probe)."""
        NX = self.model.NX
        flat = dens.scalars_probe(self.model, self.backend, st.rho, st.Phi)
        return {"rho_x": flat[:NX], "j_x": flat[NX:2 * NX], "contact": flat[2 * NX:]}

    def host_fields(self, st: State) -> dict:
        """Every field of the state on the host (snapshots, profiles), with scalar_fields' numbers."""
        be, m = self.backend, self.model
        j_sub = dens.current_subband(m, be, st.Phi)
        if st.N is None:
            st.N = poisson.volume_density(m, be, st.rho, st.chi)
        host = {k: be.to_numpy(v) for k, v in dict(
            V=st.V, N=st.N, eps=st.eps, deps_dx=st.deps_dx, rho=st.rho, chi=st.chi, j_sub=j_sub).items()}
        return {**host, **self.scalar_fields(st)}

    def record_scalars(self, host) -> None:
        """Append the scalars row of the state (``host``: scalar_fields or host_fields of it)."""
        st = self.state
        dt = getattr(self, "_last_dt", 0.0)
        self.scalars.append(output.scalars_row(self.model, st.step, st.t, dt, host["rho_x"], host["j_x"],
                                               st.newton_iterations, host.get("contact")))
        c = self.scalars[-1].get("contact_phi_min")
        if c is not None and c < output.CONTACT_WARN and not getattr(self, "_contact_warned", False):
            self._contact_warned = True
            print(f"warning: step {st.step}, t = {st.t * self.model.scales.t * 1e12:.4f} ps: Phi on the contact lines "
                  f"down to {c:.2e} of its maximum (below {output.CONTACT_WARN:g}): the contact mode of docs/iv.md §9 "
                  f"is growing; a negative-density fault may follow", file=self.log)
        if self.monitor is not None and not self.monitor.reached:
            row = self.scalars[-1]
            self.monitor.update(st.step, row["time_s"], row["mean_current_A_per_m"], host)

    def write_profiles(self, host, name) -> pd.DataFrame:
        df = output.profiles(self.model, host["rho"], host["j_sub"], host["eps"], host["deps_dx"])
        if self.out is not None:
            io.write_csv(df, self.out / name, float_format="%.10e")
        return df

    def write_snapshot(self, host) -> None:
        if self.out is None:
            return
        st = self.state
        output.write_fields(self.out / SNAPSHOTS / f"step_{st.step:07d}.h5", self.model, host, st.t, st.step,
                            attrs={"config_hash": provenance.config_hash(self.cfg)})

    # ------------------------------------------------------------------ checkpoint
    def save_checkpoint(self, name=CHECKPOINT) -> None:
        if self.out is None:
            return
        import h5py

        be, st, eq = self.backend, self.state, self.eq
        with io.atomic_path(self.out / name) as tmp:
            with h5py.File(tmp, "w") as f:
                for k in STATE_ARRAYS:
                    f.create_dataset(k, data=be.to_numpy(getattr(st, k)))
                for k in DENS_ARRAYS:
                    f.create_dataset(k, data=be.to_numpy(getattr(st, k)))
                f.create_dataset("V_b", data=be.to_numpy(eq.V_b))
                f.create_dataset("rho_eq", data=be.to_numpy(eq.rho_eq))
                for k in ("step", "t", "A_eps", "newton_iterations"):
                    f.attrs[k] = getattr(st, k)
                f.attrs["last_dt"] = getattr(self, "_last_dt", 0.0)
                if self.cfg["numerics"]["iter_start"] == "extrapolate" and getattr(self, "_V_last", None) is not None:
                    f.create_dataset("V_last", data=np.stack([be.to_numpy(v) for v in self._V_last]))
                it = getattr(self, "_iter", None)
                if it is not None and it.contraction is not None:  # numerics.iter_stop = estimate
                    f.attrs["iter_contraction"] = it.contraction
                    f.attrs["iter_contraction_age"] = it.contraction_age
                jac = getattr(self, "_jacobian", None)
                if jac is not None:  # numerics.iter_jacobian = step: the next step may keep it
                    f.create_dataset("iter_jacobian_F", data=be.to_numpy(jac[0]))
                f.attrs["A"] = eq.A
                f.attrs["initcond_iterations"] = eq.initcond_iterations
                f.attrs["thermequil_iterations"] = eq.thermequil_iterations
                f.attrs["startup_s"] = self.startup_s
                wall = self._wall_so_far()
                if wall is not None:
                    f.attrs["wall_s_run"] = wall
                f.attrs["config_hash"] = provenance.config_hash(self.cfg)
                f.attrs["bias_V"] = list(_bias_volts(self.cfg))
                if name == FINAL_STATE:  # checked by a run that starts from this state
                    f.attrs["device"] = json.dumps(self.cfg["device"])
                if self.scalars:
                    _write_table(f, "scalars", _grown_frame(self._frames, "scalars", self.scalars))
                p0 = getattr(self, "profiles_t0", None)
                if p0 is not None:  # so that a resumed run can rewrite profiles_t0.csv
                    _write_table(f, "profiles_t0", p0)
                if self._timer_rows:
                    _write_table(f, "timers", _grown_frame(self._frames, "timers", self._timer_rows))
                if self.monitor is not None:  # steady runs only: ordinary checkpoints are unchanged
                    self.monitor.save(f.create_group("steady"))
                if self.source is not None:  # as read at step 0, for the resumed run's run.json and ramp
                    f.attrs["continuation"] = json.dumps(self.source)
        if name == CHECKPOINT:
            self._checkpoint_step = st.step

    def load_checkpoint(self, path) -> bool:
        """Resume from ``path`` (of this configuration: run() has checked the folder) and return True;
        an unreadable file stops with the way out."""
        try:
            self._read_checkpoint(path)
        except (OSError, KeyError, ValueError, TypeError) as exc:
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ConfigError(f"checkpoint {str(path)!r} is corrupt or unreadable ({why}); rerun with --no-resume "
                              "to start afresh in this folder, or use a fresh --out folder") from None
        self._checkpoint_step = self.state.step
        return True

    def _read_checkpoint(self, path) -> None:
        import h5py

        be = self.backend
        with h5py.File(path, "r") as f:
            self._adopt_state(f, step=int(f.attrs["step"]), t=float(f.attrs["t"]),
                              newton_iterations=int(f.attrs["newton_iterations"]))
            self._last_dt = float(f.attrs["last_dt"])
            if "V_last" in f:  # the Newton start of the next step's first stage, as uninterrupted
                self._V_last = tuple(be.asarray(v) for v in f["V_last"][...])
            if "iter_contraction" in f.attrs:
                self._iter.contraction = float(f.attrs["iter_contraction"])
                self._iter.contraction_age = int(f.attrs["iter_contraction_age"])
            if "iter_jacobian_F" in f:  # the kept Jacobian (its factorization is made again: the same bits)
                self._jacobian = poisson.kept_jacobian(self.model, be, be.asarray(f["iter_jacobian_F"][...]))
            self.eq = Equilibrium(V_b=be.asarray(f["V_b"][...]), rho_eq=be.asarray(f["rho_eq"][...]),
                                  A=float(f.attrs["A"]), initcond_iterations=int(f.attrs["initcond_iterations"]),
                                  thermequil_iterations=int(f.attrs["thermequil_iterations"]))
            self.startup_s = float(f.attrs["startup_s"])
            # wall time of the processes before this one, up to the checkpoint (older checkpoints: unknown)
            self._wall_before = float(f.attrs["wall_s_run"]) if "wall_s_run" in f.attrs else None
            if "scalars" in f:
                self.scalars = _read_table(f["scalars"]).to_dict("records")
            if "profiles_t0" in f:
                self.profiles_t0 = _read_table(f["profiles_t0"])
            if "timers" in f:
                self._timer_rows = _read_table(f["timers"]).to_dict("records")
            if self.monitor is not None:
                self.monitor.load(f["steady"])
            if self.cfg["continuation"]["init_from"]:
                self.source = json.loads(f.attrs["continuation"])
                if self.monitor is not None:  # the ramp may have been lengthened by a retry
                    self.monitor.earliest_s = self._earliest_s(self.source["ramp_ps"])

    def _adopt_state(self, f, **scalars) -> None:
        """The state from the arrays (STATE_ARRAYS, DENS_ARRAYS) and A_eps of the open checkpoint or
        final state ``f``, with ``scalars`` (step, t, ...) for State."""
        be = self.backend
        arrays = {k: be.asarray(f[k][...]) for k in STATE_ARRAYS}
        self.state = st = State(**arrays, A_eps=float(f.attrs["A_eps"]), **scalars)
        st.rho, st.PhiHat = (be.asarray(f[k][...]) for k in DENS_ARRAYS)
        st.N = poisson.volume_density(self.model, be, st.rho, st.chi)
        # the next POTENTIAL starts from the stored eigenpairs, as in the uninterrupted run (with
        # warm-started eigenvalues they are not a function of V alone: recomputing them from V
        # would change the last bits)
        self._iter = poisson.IterResult("POTENTIAL", st.V, st.eps, st.chi, st.rho, st.N, 0, {})

    # ------------------------------------------------------------------ continuation
    def _source(self, run_dir) -> dict:
        """What continuation.init_from names: its final_state.h5 (path, bias, time, config hash),
        checked against this run: the shapes of every array it holds, and the device section.  A
        fault marker (a source run that faulted with output.on_fault = record) stops in one line
        naming the source run and its fault."""
        import h5py

        path = Path(run_dir) / FINAL_STATE
        key = "config key 'continuation.init_from'"
        try:
            with h5py.File(path, "r") as f:
                if "fault" in f.attrs:  # output.on_fault = record: a marker, no state (_write_fault_record)
                    fault = " ".join(str(f.attrs["fault"]).split())
                    err = SourceFaulted(f"{key}: the source run {str(run_dir)!r} ended with a numerical fault, so "
                                        f"{FINAL_STATE} holds no state (fault: {fault})")
                    err.root_fault = str(f.attrs.get("root_fault", fault))  # the first fault of a chain
                    raise err
                shapes = {k: tuple(f[k].shape) for k in STATE_ARRAYS + DENS_ARRAYS}
                device = json.loads(f.attrs["device"]) if "device" in f.attrs else None
                src = {"init_from": str(run_dir), "source_config_hash": str(f.attrs["config_hash"]),
                       "source_bias_V": [float(v) for v in f.attrs["bias_V"]],
                       "source_t_ps": float(f.attrs["t"]) * self.model.scales.t * 1e12,
                       "source_steps": int(f.attrs["step"]), "ramp_ps": self.cfg["continuation"]["ramp_ps"]}
        except (OSError, KeyError) as exc:
            raise ConfigError(f"{key}: cannot read {str(path)!r} ({exc}); the source run "
                              "must have finished with continuation.save_final_state: true") from None
        for k, want in _state_shapes(self.model).items():
            if shapes[k] != want:
                raise ConfigError(f"{key}: {str(path)!r} holds {k} of shape {shapes[k]}, this mesh needs {want}")
        here = self.cfg["device"]
        if device is not None and device != here:  # final states written before the device was recorded: unchecked
            diff = "; ".join(f"device.{k} = {device.get(k)} there, {here.get(k)} here"
                             for k in sorted(device.keys() | here.keys()) if device.get(k) != here.get(k))
            raise ConfigError(f"{key}: {str(path)!r} is the state of another device ({diff})")
        return src

    def init_from(self, run_dir) -> None:
        """Bias continuation: after the start-up at this run's bias (V_b and rho^eq, the contact
        data, depend on the gates), take Phi, V and the eigenpairs from the source's final state;
        the first ITER re-solves the potential with this run's (or the ramp's) boundary values."""
        import h5py

        self.source = self._source(run_dir)
        with h5py.File(Path(run_dir) / FINAL_STATE, "r") as f:
            self._adopt_state(f)
        print(f"continuation: initial state from {run_dir} (bias {self.source['source_bias_V']} V, "
              f"t = {self.source['source_t_ps']:.4f} ps)", file=self.log)

    def _ramp_bias(self, t) -> None:
        """The bias of the step ending at ``t``: linear from the source's to this run's over
        continuation.ramp_ps (the model reads it; the run's configuration is not changed)."""
        ramp = self.source["ramp_ps"] * 1e-12 / self.model.scales.t  # the config's, or lengthened by a retry
        f = 1.0 if ramp <= 0 else min(t / ramp, 1.0)
        if f >= 1.0:
            self.model.cfg = self.cfg
            return
        a, b = self.source["source_bias_V"], _bias_volts(self.cfg)
        g_bot, g_top, vds = ((1 - f) * x + f * y for x, y in zip(a, b))
        self.model.cfg = {**self.cfg, "bias": {**self.cfg["bias"], "V_G": g_bot, "V_G_bottom": g_bot,
                                               "V_G_top": g_top, "V_DS": vds}}

    # ------------------------------------------------------------------ run folder
    def folder_hashes(self) -> set:
        """Configuration hashes of the run(s) already in the output folder: from the checkpoint,
        run.json and the snapshots (an unreadable file tells nothing)."""
        import h5py

        found = set()
        files = [self.out / CHECKPOINT, self.out / "fields.h5"] + sorted((self.out / SNAPSHOTS).glob("step_*.h5"))
        for p in files:
            try:
                with h5py.File(p, "r") as f:
                    if "config_hash" in f.attrs:
                        found.add(str(f.attrs["config_hash"]))
            except (OSError, KeyError):
                pass
        try:
            found.add(io.read_json(self.out / "run.json")["config_hash"])
        except (OSError, ValueError, KeyError):
            pass
        return found

    def claim_folder(self, overwrite: bool) -> None:
        """Refuse an output folder holding another configuration's run unless ``overwrite``; then
        remove that run's files (nothing else in the folder)."""
        io.check_out_dir(self.out)
        if not self.out.is_dir():
            return
        mine = provenance.config_hash(self.cfg)
        others = self.folder_hashes() - {mine}
        if not others:
            return
        if not overwrite:
            raise ConfigError(f"--out {str(self.out)!r} holds the run of another configuration (config hash "
                              f"{', '.join(sorted(others))}; this one is {mine}); allowed: --overwrite to replace "
                              "it, or another folder")
        for name in RUN_FILES:
            (self.out / name).unlink(missing_ok=True)
        snaps = self.out / SNAPSHOTS
        for p in snaps.glob("step_*.h5"):
            p.unlink()
        if snaps.is_dir() and not any(snaps.iterdir()):
            snaps.rmdir()
        print(f"--overwrite: removed the run of configuration {', '.join(sorted(others))} from {self.out}",
              file=self.log)

    # ------------------------------------------------------------------ driver
    def done(self) -> bool:
        st = self.state
        if self.monitor is not None and self.monitor.reached:
            return True
        if self.max_steps is not None and st.step >= self.max_steps:
            return True
        return st.t >= self.t_end * (1 - 1e-12)

    def run(self, resume: bool = True, overwrite: bool = False) -> dict:
        """Run to the end; resume from a checkpoint of this configuration in the output folder
        unless ``resume`` is False; a folder holding another configuration's run is refused
        unless ``overwrite``.  A RunFault of the time loop that _retry_ramp does not take (or
        cannot: a retry that fails to start leaves the fault) ends the run (raised, its message
        naming the ramp's retries, _ramp_note); with output.on_fault = record the folder first gets
        the fault's record (_record_fault), and a continuation source that is a fault marker is
        recorded as this run's fault (_source_fault).  A start-up fault is raised as it is.
        SIGINT or SIGTERM during the run (in the main thread) stops it at the end of the step: a
        checkpoint of that step, then :class:`Interrupted` (_stop_signals, _take_stop)."""
        with self._stop_signals():
            return self._run(resume, overwrite)

    @contextlib.contextmanager
    def _stop_signals(self):
        """SIGINT and SIGTERM while the run goes on (Ctrl-C, ``kill``, a batch system's time limit or
        preemption, Snakemake stopping its jobs, ``timeout``): the first only sets ``_stop_signal``,
        which the time loop takes at the end of the step (_take_stop: a checkpoint, then Interrupted),
        so a stopped run loses no step; a second one stops at once (KeyboardInterrupt), as the default
        SIGINT would.  The earlier handlers come back afterwards.  A signal the process ignores (SIGINT
        in a job a shell started with ``&``, ``nohup``) stays ignored; outside the main thread (where
        Python cannot install handlers) nothing changes."""
        import signal
        import threading

        self._stop_signal = None
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def handler(signum, frame):  # no output here: the main thread may be inside a write to the log
            if self._stop_signal is not None:
                raise KeyboardInterrupt
            self._stop_signal = signum

        old = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)
               if signal.getsignal(sig) is not signal.SIG_IGN}
        try:
            yield
        finally:
            for sig, h in old.items():
                signal.signal(sig, h)

    def _take_stop(self) -> None:
        """The time loop's answer to a stop signal (_stop_signals), between two steps: a checkpoint of
        this step (where the run has a folder), then Interrupted naming the signal, the step and how to
        resume (exit code 128 + the signal through the CLI)."""
        import signal

        st, sig = self.state, self._stop_signal
        where = f"{signal.Signals(sig).name} at step {st.step}, t = {st.t * self.model.scales.t * 1e12:.4f} ps"
        if self.out is None:
            raise Interrupted(f"{where}: no output folder, nothing kept", sig)
        if getattr(self, "_checkpoint_step", None) != st.step or not (self.out / CHECKPOINT).exists():
            self.save_checkpoint()  # (not twice: the periodic checkpoint of this step may be written already)
        raise Interrupted(f"{where}: checkpoint written ({self.out / CHECKPOINT}); the same command resumes "
                          f"the run", sig)

    def _run(self, resume: bool, overwrite: bool) -> dict:
        self._wall0 = wall0 = time.perf_counter()
        self._wall_before = 0.0
        self._timer_rows: list[dict] = []
        resumed = False
        if self.out is not None:
            self.claim_folder(overwrite)
            ck = self.out / CHECKPOINT
            if resume and ck.exists():
                resumed = self.load_checkpoint(ck)
            self.out.mkdir(parents=True, exist_ok=True)
            if resumed:
                print(f"resumed from {ck} at step {self.state.step}", file=self.log)
                p0 = getattr(self, "profiles_t0", None)
                if p0 is not None and not (self.out / "profiles_t0.csv").exists():
                    io.write_csv(p0, self.out / "profiles_t0.csv", float_format="%.10e")
        if not resumed:
            try:
                self.startup()
            except poisson.ConvergenceError as exc:
                raise RunFault(f"start-up (INITCOND, THERMEQUIL): Newton failed ({exc})") from None
            if self.cfg["continuation"]["init_from"]:
                try:
                    self.init_from(self.cfg["continuation"]["init_from"])
                except SourceFaulted as exc:
                    if not self._on_fault_record():
                        raise
                    raise self._source_fault(exc, time.perf_counter() - wall0) from None
            host = self.host_fields(self.state)
            self.profiles_t0 = self.write_profiles(host, "profiles_t0.csv")
            self.record_scalars(host)
            self.write_snapshot(host)
        while True:
            try:
                self._loop()
                break
            except RunFault as exc:
                if not self._retry_ramp(exc):
                    err = self._ramp_note(exc)
                    if self._on_fault_record():
                        self._record_fault(err, time.perf_counter() - wall0)
                    if err is exc:
                        raise
                    raise err from exc
        host = self.host_fields(self.state)
        if not self.scalars or self.scalars[-1]["step"] != self.state.step:
            self.record_scalars(host)
        final = self.write_profiles(host, "profiles.csv")
        self.write_snapshot(host)
        if self.cfg["continuation"]["save_final_state"]:
            self.save_checkpoint(FINAL_STATE)
        return self.finish(host, final, time.perf_counter() - wall0)

    def _loop(self) -> None:
        """Steps until done(), with the scalars, snapshots and checkpoints of the output settings."""
        oc = self.cfg["output"]
        s = self.model.scales
        next_snap_t = (math.floor(self.state.t * s.t * 1e12 / oc["every_ps"]) + 1) * oc["every_ps"] if oc["every_ps"] else math.inf
        bar = Progress(self, enabled=self.progress)
        every_s = oc.get("checkpoint_every_s") or 0.0
        last_ck = time.perf_counter()  # output.checkpoint_every_s: from this process's start or last checkpoint
        try:
            while not self.done():
                if getattr(self, "_stop_signal", None) is not None:
                    self._take_stop()
                self.step()
                st = self.state
                need_host = (st.step % oc["scalars_every"] == 0) or self.done()
                snap = (oc["every_steps"] and st.step % oc["every_steps"] == 0) or st.t * s.t * 1e12 >= next_snap_t - 1e-9
                if need_host or snap:
                    host = self.host_fields(st) if snap else self.scalar_fields(st)
                    self.record_scalars(host)
                    if snap:
                        self.write_snapshot(host)
                        if oc["every_ps"]:
                            next_snap_t += oc["every_ps"]
                due = oc["checkpoint_every_steps"] and st.step % oc["checkpoint_every_steps"] == 0
                if every_s and not due:
                    due = time.perf_counter() - last_ck >= every_s
                if due and not self.done():
                    self.save_checkpoint()
                    last_ck = time.perf_counter()
                bar.update()
        finally:
            bar.close()

    def _retry_ramp(self, exc: RunFault) -> bool:
        """Adaptive ramp (RAMP_RETRIES): after a negative-density fault of a continued run during its
        bias ramp or within one ramp time after it, start again from the source's state with twice
        the ramp time (True), unless that is over half the run's time limit; otherwise False (the
        fault stands).  summary.continuation records
        ``ramp_ps`` (the ramp used), ``ramp_ps_config`` and ``ramp_faults`` (one line per retry).
        A retry that fails to start (its source's final state gone or now a fault marker, or any
        other error) is False too: the run is put back as the attempt that faulted left it (for its
        fault record) and ``exc.ramp_retry_error`` says why (_ramp_note)."""
        src = self.source
        if src is None or src["ramp_ps"] <= 0 or "negative density" not in str(exc):
            return False
        faults = src.get("ramp_faults", [])
        t_ps = self.state.t * self.model.scales.t * 1e12
        ramp = 2 * src["ramp_ps"]
        t_end_ps = self.t_end * self.model.scales.t * 1e12
        if len(faults) >= RAMP_RETRIES or t_ps > 2 * src["ramp_ps"] or ramp > t_end_ps / 2:
            return False  # past the retries, not a fault of the ramp, or a ramp over half the run
        print(f"fault during the bias ramp of {src['ramp_ps']:g} ps at t = {t_ps:.4f} ps ({str(exc).split(';')[0]}); "
              f"starting again from {src['init_from']} with a {ramp:g} ps ramp", file=self.log)
        attempt, model_cfg = dict(vars(self)), self.model.cfg  # the attempt that faulted (the retry replaces them)
        try:
            self._restart_ramp(exc, src, ramp, faults)
        except Exception as why:
            vars(self).clear()
            vars(self).update(attempt)
            self.model.cfg = model_cfg
            exc.ramp_retry_error = (f"the bias ramp retry (ramp {ramp:g} ps) could not start "
                                    f"({type(why).__name__}: {' '.join(str(why).split())})")
            print(f"{exc.ramp_retry_error}; the fault stands", file=self.log)
            return False
        return True

    def _restart_ramp(self, exc: RunFault, src: dict, ramp: float, faults: list) -> None:
        """_retry_ramp's new attempt: the source's state, a ``ramp`` ps ramp, nothing of the failed attempt."""
        self.init_from(src["init_from"])
        self.source.update(ramp_ps=ramp, ramp_ps_config=src.get("ramp_ps_config", src["ramp_ps"]),
                           ramp_faults=faults + [f"ramp {src['ramp_ps']:g} ps: {str(exc).split(';')[0]}"])
        for name in ("_V_last", "_last_step_kept", "_jacobian", "_pending_dx", "_last_dt", "_checkpoint_step"):
            self.__dict__.pop(name, None)
        self.timer = PhaseTimer(self.backend)
        self._timer_rows = []
        self.scalars = []
        if self.monitor is not None:
            self.monitor = steady.Monitor(self.model, self.cfg["steady"], self._earliest_s(ramp))
        self.model.cfg = self.cfg
        self.record_scalars(self.host_fields(self.state))
        if self.out is not None:  # the failed attempt's checkpoint (a resume must not return to it) and snapshots
            (self.out / CHECKPOINT).unlink(missing_ok=True)  # last: a retry that fails before leaves them
            for p in (self.out / SNAPSHOTS).glob("step_*.h5"):
                if p.name != f"step_{0:07d}.h5":
                    p.unlink()

    def _ramp_note(self, exc: RunFault) -> RunFault:
        """The fault that ends a continued run, its message naming the bias ramp's retries (summary.continuation's
        ramp_faults) and why a retry did not start (_retry_ramp): a RunFault of the same step and phase, or
        ``exc`` itself where there is nothing to add."""
        src = self.source or {}
        n = len(src.get("ramp_faults", []))
        notes = [f"after {n} bias ramp retr{'y' if n == 1 else 'ies'} (ramp {src['ramp_ps_config']:g} ps, "
                 f"now {src['ramp_ps']:g} ps)"] if n else []
        notes += [exc.ramp_retry_error] if getattr(exc, "ramp_retry_error", None) else []
        if not notes:
            return exc
        err = RunFault("; ".join([str(exc)] + notes))
        for key in ("step", "phase"):  # where exc has them (_fault); else _write_fault_record's defaults
            if hasattr(exc, key):
                setattr(err, key, getattr(exc, key))
        return err

    def _on_fault_record(self) -> bool:
        return self.out is not None and self.cfg["output"].get("on_fault", "stop") == "record"

    def _source_fault(self, exc: SourceFaulted, wall_s: float) -> RunFault:
        """output.on_fault = record and continuation.init_from names a faulted run (a chain of bias points):
        this run records a fault of its own, phase "continuation", at step 0 (scalars.csv: the row of its
        start-up state), with ``summary.continuation = {init_from, source_fault}`` (source_fault: the first fault
        of the chain, which the marker keeps as ``root_fault``), and the RunFault to raise
        (exit code 3), so the points after it in the chain are recorded the same way."""
        run_dir = self.cfg["continuation"]["init_from"]
        self.source = {"init_from": str(run_dir), "source_fault": exc.root_fault}
        self.record_scalars(self.host_fields(self.state))
        err = RunFault(f"continuation: the source run {str(run_dir)!r} ended with a numerical fault; this run "
                       "did not start")
        err.step, err.phase, err.root_fault = 0, "continuation", exc.root_fault
        self._record_fault(err, wall_s)
        return err

    def _record_fault(self, exc: RunFault, wall_s: float) -> None:
        """_write_fault_record; a failure to write it is a warning on the log (the fault stays the run's
        outcome, exit code 3)."""
        try:
            self._write_fault_record(exc, wall_s)
        except Exception as rec_exc:
            print(f"warning: output.on_fault record: the fault's record was not written "
                  f"({type(rec_exc).__name__}: {rec_exc})", file=self.log)

    def _write_fault_record(self, exc: RunFault, wall_s: float) -> None:
        """output.on_fault = record: what a finished run writes (finish: run.json, scalars.csv with
        every row recorded so far, timers.csv), with ``summary.status = "fault"`` (the only place
        the status is given; a run without it finished) and ``summary.fault = {message, step,
        t_ps, phase}`` (``step`` the step that failed, ``t_ps`` the time of the last good state,
        the start of that step); no fields.h5, profiles.csv or quicklook.png (the state is the
        failed stage's) and the checkpoint is kept.  With continuation.save_final_state,
        final_state.h5 is a fault marker: the attribute ``fault`` (the message) and no state
        arrays, which a run starting from it (_source) refuses in one line, or under record records
        as a fault of its own (_source_fault)."""
        import h5py

        message = " ".join(str(exc).split())
        fault = {"message": message, "step": int(getattr(exc, "step", self.state.step + 1)),
                 "t_ps": self.state.t * self.model.scales.t * 1e12, "phase": getattr(exc, "phase", None)}
        if self.cfg["continuation"]["save_final_state"]:
            with io.atomic_path(self.out / FINAL_STATE) as tmp:
                with h5py.File(tmp, "w") as f:
                    f.attrs["fault"] = message
                    if getattr(exc, "root_fault", None):  # a chain's first fault (_source_fault)
                        f.attrs["root_fault"] = exc.root_fault
                    f.attrs["config_hash"] = provenance.config_hash(self.cfg)
        self.finish(None, None, wall_s, fault=fault)

    def _wall_so_far(self) -> float | None:
        """Wall time of this run up to now over all its processes (a resumed run adds the time of the
        earlier ones up to the checkpoint it resumed from; the work they did after it is redone and
        counted once); None where an older checkpoint did not record it."""
        before = getattr(self, "_wall_before", 0.0)
        wall0 = getattr(self, "_wall0", None)
        if before is None or wall0 is None:
            return None
        return before + time.perf_counter() - wall0

    def finish(self, host, final: pd.DataFrame | None, wall_s: float, fault: dict | None = None) -> dict:
        """The run's record (run.json) and its files.  ``fault`` (_write_fault_record; ``host`` and
        ``final`` None): the summary gets ``status = "fault"`` and ``fault``, its steady record has
        no final spreads, and only scalars.csv, timers.csv and run.json are written (the
        checkpoint stays; fields.h5, profiles.csv and quicklook.png left in the folder by an earlier
        finished run of this configuration are removed: they are not this run's; so are the
        snapshots of the fault's step and later (write_snapshot's step_NNNNNNN.h5), which this run
        never reached: an earlier, longer run's or attempt's)."""
        import pandas as pd

        st, m = self.state, self.model
        summary = {
            "steps": st.step,
            "t_end_s": st.t * m.scales.t,
            "mean_current_A_per_m": self.scalars[-1]["mean_current_A_per_m"],
            "total_mass_per_m": self.scalars[-1]["total_mass_per_m"],
            "wall_s": wall_s,
            "wall_s_run": self._wall_so_far(),  # wall_s of all the run's processes (resumes)
            "startup_s": self.startup_s,
            "initcond_iterations": self.eq.initcond_iterations,
            "thermequil_iterations": self.eq.thermequil_iterations,
            "A": self.eq.A,
            "mesh": [m.N_sbn, m.NX, m.NZ, m.NW, m.NPHI],
        }
        if self.monitor is not None:
            summary["steady"] = {**self.monitor.record(), "final_spreads": None if fault else steady.spreads(self)}
        contact = output.contact_summary(self.scalars)
        if contact is not None:
            summary["contact_lines"] = contact
        if self.cfg["continuation"]["init_from"]:
            summary["continuation"] = self.source
        if fault is not None:
            summary["status"] = "fault"
            summary["fault"] = fault
        timers = self.timer.summary()
        timers["startup_s"] = self.startup_timer.summary()["total_s"]
        timers["steps"] = st.step
        if self._speculate:  # this process's numerics.bte_speculate: stages taken from ITER's launch, stages dropped
            timers.update(self.speculation)
        if self._timer_rows:
            tr = pd.DataFrame(self._timer_rows)
            timers["total_s"] = tr.groupby("phase")["seconds"].sum().to_dict()
            n = tr["step"].nunique()
            timers["mean_per_step_s"] = {k: v / n for k, v in timers["total_s"].items()}
        from solver.bsp import kernels
        kern = {"mode": kernels.mode(m), "implementations": kernels.implementations(m, self.backend),
                "bte_speculate": self._speculate}  # numerics.bte_speculate as resolved (its counts: timers)
        record = provenance.collect(self.cfg, self.backend, {"summary": summary, "timers": timers,
                                                             "kernels": kern})
        if self.out is not None:
            io.write_csv(pd.DataFrame(self.scalars), self.out / "scalars.csv", float_format="%.12e")
            io.write_csv(pd.DataFrame(self._timer_rows, columns=["step", "phase", "seconds"]),
                         self.out / "timers.csv", float_format="%.6e")
            if fault is not None:
                for name in ("fields.h5", "profiles.csv", "quicklook.png"):  # an earlier finished run's (same hash)
                    (self.out / name).unlink(missing_ok=True)
                for p in (self.out / SNAPSHOTS).glob("step_*.h5"):  # an earlier run's from the fault's step on
                    if p.stem[5:].isdecimal() and int(p.stem[5:]) >= fault["step"]:
                        p.unlink()
                io.write_json(self.out / "run.json", record)
                return record
            output.write_fields(self.out / "fields.h5", m, host, st.t, st.step,
                                attrs={"config": self.cfg, "config_hash": provenance.config_hash(self.cfg),
                                       "summary": summary})
            io.write_json(self.out / "run.json", record)
            output.quicklook(self.out / "quicklook.png", m, final, host, st.t)
            ck = self.out / CHECKPOINT
            if ck.exists():
                ck.unlink()
        return record


class _Speculation:
    """numerics.bte_speculate: poisson.potential's ``before_read`` for RK stage ``s`` - 1's ITER.  Called (at most once)
    by the first kept-Jacobian Newton iteration with its new iterate's levels, eigenvectors, d eps/dx and A_eps once
    that iteration is enqueued and before the host reads its norms, it launches RK stage ``s``'s BTE from them
    (the overlap integrals W, then bte.advance), timed as phase BTE beside ITER (PhaseTimer.aside), so that the GPU
    runs it right after the iteration while the host reads and checks.  ``take``: that stage's (Phi, dens) where
    ITER accepted that very iterate (the same arrays: the stage then equals the one launched after ITER, bit for
    bit), else None: the launch is dropped (its outputs are never read) and the stage's BTE runs as without it."""

    def __init__(self, sim: Simulation, s: int, Phi0, dt: float):
        self.sim, self.s, self.Phi0, self.dt = sim, s, Phi0, dt
        self.launched = None

    def __call__(self, eps, chi, deps_dx, A_eps) -> None:
        sim = self.sim
        m, be, tm, st = sim.model, sim.backend, sim.timer, sim.state
        with tm.aside("BTE"):
            with tm.phase("overlap"):
                W = scattering.overlap(m, be, chi)
            sd = bte.StageData(eps=eps, deps_dx=deps_dx, W=W, PhiHat=st.PhiHat, rho=st.rho, rho_eq=sim.eq.rho_eq,
                               A_eps=A_eps)
            Phi, dn = bte.advance(m, be, self.s, self.Phi0, st.Phi, sd, self.dt, timer=tm)
        self.launched = (eps, chi, deps_dx, Phi, dn)

    def take(self, res):
        if self.launched is None:  # the call did not come (no kept-Jacobian iteration ran as one call)
            return None
        eps, chi, deps_dx, Phi, dn = self.launched
        self.launched = None
        ok = res.eps is eps and res.chi is chi and res.tail is not None and res.tail[0] is deps_dx
        self.sim.speculation["bte_speculated" if ok else "bte_speculation_dropped"] += 1
        return (Phi, dn) if ok else None


def _state_shapes(m) -> dict:
    """Shapes of the checkpointed state arrays (STATE_ARRAYS + DENS_ARRAYS) of the model ``m``."""
    P = (m.NX, 3, m.N_sbn)
    return {"Phi": P + (m.NW, m.NPHI), "V": (m.NX, m.NZ), "eps": P, "chi": P + (m.NZ,), "deps_dx": P,
            "rho": P, "PhiHat": P + (m.NW,)}


def _bias_volts(cfg) -> tuple[float, float, float]:
    """(bottom gate, top gate, drain-source) voltages in V."""
    return (*gate_volts(cfg), cfg["bias"]["V_DS"])


def _grown_frame(cache: dict, name: str, rows: list) -> pd.DataFrame:
    """``pd.DataFrame(rows)`` for a list of row dicts that only grows between calls: the scalars and timers tables,
    which every checkpoint writes whole.  Only the rows added since the last call are converted and appended, so a
    checkpoint no longer costs O(steps) of Python per call (a 2.5 ps standard-mesh run has 1.6e6 timer rows:
    docs/iv.md §21).  The same frame as the whole conversion: a list not the one held (reassigned), shorter than
    at the last call, or new rows whose columns or dtypes differ from the held frame's are converted whole."""
    import pandas as pd

    held = cache.get(name)
    if held is not None and held[0] is rows and held[1] <= len(rows):
        _, n, df = held
        if n < len(rows):
            new = pd.DataFrame(rows[n:])
            if list(new.columns) == list(df.columns) and all(new.dtypes == df.dtypes):
                df = pd.concat([df, new], ignore_index=True)
            else:
                df = pd.DataFrame(rows)
    else:
        df = pd.DataFrame(rows)
    cache[name] = (rows, len(rows), df)
    return df


def _write_table(f, name, df: pd.DataFrame) -> None:
    """A DataFrame as an HDF5 group of columns, keeping the column order (HDF5 lists members sorted)."""
    g = f.create_group(name)
    for c in df.columns:
        v = df[c].to_numpy()
        g.create_dataset(c, data=v.astype("S") if v.dtype == object else v)
    g.attrs["columns"] = list(df.columns)


def _read_table(g) -> pd.DataFrame:
    import pandas as pd

    cols = {}
    for c in (str(c) for c in g.attrs["columns"]):
        v = g[c][...]
        cols[c] = v.astype(str) if v.dtype.kind == "S" else v
    return pd.DataFrame(cols)


class Progress:
    """A light progress bar on stderr: redrawn in place on a terminal, a line every 10 % otherwise."""

    def __init__(self, sim: Simulation, enabled=True):
        self.sim, self.enabled = sim, enabled
        self.tty = enabled and hasattr(sim.log, "isatty") and sim.log.isatty()
        self.t0 = time.perf_counter()
        self.last_draw = 0.0
        self.last_decile = -1
        self.first_step = sim.state.step + 1  # the first step of this process (after a resume too)
        self.ref = None  # (time, fraction) at the end of that first step: the ETA is timed from there

    def eta(self, now: float, f: float) -> str:
        """Time left from the rate of this process's steps after its first (which compiles and
        warms up); none until ETA_AFTER_STEPS of them are done."""
        step = self.sim.state.step
        if self.ref is None:
            self.ref = (now, f)
        ready = self.first_step + ETA_AFTER_STEPS
        t_ref, f_ref = self.ref
        if step < ready or f <= f_ref:
            return f"ETA after step {ready}"
        return f"~{(now - t_ref) * (1 - f) / (f - f_ref):.0f} s left"

    def fraction(self) -> float:
        sim, st = self.sim, self.sim.state
        fs = st.step / sim.max_steps if sim.max_steps else 0.0
        ft = st.t / sim.t_end if math.isfinite(sim.t_end) and sim.t_end > 0 else 0.0
        return min(max(fs, ft), 1.0)

    def update(self) -> None:
        if not self.enabled:
            return
        f = self.fraction()
        now = time.perf_counter()
        st, s = self.sim.state, self.sim.model.scales
        elapsed = now - self.t0
        msg = (f"step {st.step}  t = {st.t * s.t * 1e12:.4f} ps  {100 * f:5.1f} %  "
               f"{elapsed:.0f} s elapsed, {self.eta(now, f)}")
        if self.tty:
            if now - self.last_draw > 0.2 or f >= 1:
                n = int(30 * f)
                print(f"\r[{'#' * n}{'.' * (30 - n)}] {msg}", end="", file=self.sim.log, flush=True)
                self.last_draw = now
        elif int(10 * f) > self.last_decile:
            self.last_decile = int(10 * f)
            print(msg, file=self.sim.log, flush=True)

    def close(self) -> None:
        if self.tty:
            print(file=self.sim.log)
