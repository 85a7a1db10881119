"""Steady state of a BSP run (schema section ``steady``; docs/iv.md).

A run stops at steady state when, over the last ``window_ps`` of simulated time,

- the mean current <j> (physics.md §9) has settled: the time averages of <j> over the three
  thirds of the window differ from one third to the next by less than ``rtol`` relative (three,
  not two: two halves have equal means when the window is centred on a maximum or minimum of a
  relaxing current, which stopped early runs at the current's first peak), and
- the current is conserved in x: the charge that accumulated in [0, x] over the window, divided
  by the window, is the difference between the time-averaged (conserved, face) current entering
  at x = 0 and leaving at x; its largest value over x, relative to the current, is below
  ``conservation_tol``.

The second test is "j(x) uniform in x" in the form a converged run of this discretisation can
meet.  The nodal j_i = 2 sum a1 Phi dw dphi is not the conserved flux: the scheme conserves the
WENO face fluxes h_{i+1/2} of a1 Phi, and at the doping junctions (x = 5 and 15 nm), where the
density drops by 3x within a cell, the nodal value differs from the neighbouring face fluxes by
tens of percent, at any time and shrinking with the x mesh (docs/iv.md has the evidence).  The
face-flux spread itself carries the O(dw) mass leak of the inelastic scattering terms
(physics.md §6): the accumulated charge measures the transient alone.  Both spreads (nodal,
face) are recorded with the final residuals for the docs, not used by the stop.

Relative quantities are taken against max(|<j>|, current_floor_A_per_m), so a run at V_DS = 0
(current ~ round-off) does not divide by zero; it runs to the time limit.  A continued run with a
bias ramp (continuation.ramp_ps) is not tested before ramp_ps + window_ps: a window that holds
part of the ramp can look settled.  The monitor's state is checkpointed (``save``, ``load``), so a
resumed run stops at the step of the uninterrupted one.

``hold_windows`` (h >= 0; absent or 0: the first check that passes stops the run) guards against a
plateau: a current that rests for a window just after the start-up oscillation and then moves on a
slower scale passes both tests once (docs/iv.md §1, §20).  With h > 0 steady state is declared at
the first check at which both tests have passed at every check since a time at least h windows
earlier; a failed check restarts the count.  The start of the passing run (``passing_since``) is
checkpointed with the window, and ``record`` gives it and the first passing check of the run.
"""
from __future__ import annotations

import json
from collections import deque

import numpy as np

from solver.bsp import bte, scattering
from solver.bsp.constants import Q, VALLEY_DEGENERACY


CHECKS_PER_WINDOW = 30  # the tests run every window/30 of simulated time (not every row: ~1 ms each)


class Monitor:
    """Time series of <j> and N_s(x) over the last window; ``update`` after every recorded
    scalars row, ``reached`` once both tests pass (tested once the window is full, then every
    window / CHECKS_PER_WINDOW of simulated time, not before ``earliest_s`` of simulated time)."""

    def __init__(self, model, cfg_steady: dict, earliest_s: float = 0.0):
        s = model.scales
        self.model = model
        self.window_s = cfg_steady["window_ps"] * 1e-12
        self.rtol = cfg_steady["rtol"]
        self.ctol = cfg_steady["conservation_tol"]
        self.floor = cfg_steady["current_floor_A_per_m"]
        self.dx_m = model.dx * s.Lx
        self.earliest_s = earliest_s
        self.hold_windows = float(cfg_steady.get("hold_windows") or 0.0)  # absent: 0
        self.hold_s = self.hold_windows * self.window_s
        self.passing_since_s = None  # the first check of the present run of passing checks (None: the last failed)
        self.first_pass_s = None  # the first passing check of the run
        self.hist: deque[tuple[float, float, np.ndarray]] = deque()  # (t_s, <j> A/m, N_s(x) m^-2)
        self.next_check_s = -np.inf
        self.reached = False
        self.t_reached_s = None
        self.step_reached = None
        self.last = {}

    def update(self, step: int, t_s: float, mean_current: float, host) -> bool:
        """Add the state of ``step`` (``host``: Simulation.scalar_fields of it); True at steady state."""
        Ns = VALLEY_DEGENERACY * host["rho_x"] * self.model.scales.rho
        self.hist.append((t_s, mean_current, Ns))
        t0 = t_s - self.window_s
        while len(self.hist) > 2 and self.hist[1][0] <= t0 * (1 + 1e-12):
            self.hist.popleft()
        if (self.hist[0][0] > t0 * (1 + 1e-12) or len(self.hist) < 4 or t_s < self.next_check_s
                or t_s < self.earliest_s * (1 - 1e-12)):
            return False  # less than one window of history, checked a moment ago, or still ramping
        self.next_check_s = t_s + self.window_s / CHECKS_PER_WINDOW * (1 - 1e-9)
        self.last = self.residuals()
        if not (self.last["drift"] < self.rtol and self.last["charging"] < self.ctol):
            self.passing_since_s = None  # a failed check restarts the hold
            return self.reached
        if self.passing_since_s is None:
            self.passing_since_s = t_s
        if self.first_pass_s is None:
            self.first_pass_s = t_s
        if t_s - self.passing_since_s >= self.hold_s * (1 - 1e-9):  # hold 0: at once
            self.reached = True
            self.t_reached_s, self.step_reached = t_s, step
        return self.reached

    def save(self, group) -> None:
        """Write the state (window history, next check, last residuals) into the HDF5 ``group``."""
        group.create_dataset("t_s", data=np.array([h[0] for h in self.hist]))
        group.create_dataset("current_A_per_m", data=np.array([h[1] for h in self.hist]))
        group.create_dataset("Ns_m2", data=np.array([h[2] for h in self.hist]))
        group.attrs["next_check_s"] = self.next_check_s
        group.attrs["last"] = json.dumps(self.last)
        group.attrs["passing_since_s"] = np.nan if self.passing_since_s is None else self.passing_since_s
        group.attrs["first_pass_s"] = np.nan if self.first_pass_s is None else self.first_pass_s

    def load(self, group) -> None:
        """Restore the state written by ``save`` (a checkpoint is written only before the stop)."""
        self.hist = deque(zip((float(v) for v in group["t_s"][...]),
                              (float(v) for v in group["current_A_per_m"][...]), group["Ns_m2"][...]))
        self.next_check_s = float(group.attrs["next_check_s"])
        self.last = json.loads(group.attrs["last"])
        # a checkpoint from before hold_windows has neither: it was written before any check passed
        # (there the first passing check was the stop)
        self.passing_since_s, self.first_pass_s = (
            _or_none(group.attrs.get(k, np.nan)) for k in ("passing_since_s", "first_pass_s"))

    def residuals(self) -> dict:
        t = np.array([h[0] for h in self.hist])
        j = np.array([h[1] for h in self.hist])
        edges = np.linspace(t[0], t[-1], 4)
        m = [_time_mean(t, j, a, b) for a, b in zip(edges[:-1], edges[1:])]
        current = _time_mean(t, j, t[0], t[-1])
        scale = max(abs(current), self.floor)
        dNs = self.hist[-1][2] - self.hist[0][2]  # m^-2 over the window
        charge = Q * np.concatenate([[0.0], np.cumsum(_trapezoid_cells(dNs) * self.dx_m)])  # C/m in [0, x]
        charging = float(np.max(np.abs(charge)) / (t[-1] - t[0]) / scale)
        drift = max(abs(m[1] - m[0]), abs(m[2] - m[1])) / scale
        return {"t_ps": float(t[-1] * 1e12), "current_A_per_m": float(current), "drift": float(drift),
                "charging": charging, "window_ps": float((t[-1] - t[0]) * 1e12)}

    def record(self) -> dict:
        return {"enabled": True, "reached": self.reached,
                "t_reached_ps": None if self.t_reached_s is None else self.t_reached_s * 1e12,
                "step_reached": self.step_reached, "rtol": self.rtol, "conservation_tol": self.ctol,
                "window_ps": self.window_s * 1e12, "hold_windows": self.hold_windows,
                "t_first_pass_ps": _ps(self.first_pass_s), "t_passing_since_ps": _ps(self.passing_since_s),
                **self.last}


def _or_none(v):
    v = float(v)
    return None if np.isnan(v) else v


def _ps(t_s):
    return None if t_s is None else t_s * 1e12


def _time_mean(t, y, a, b) -> float:
    """Time average of the piecewise-linear y(t) over [a, b] (a, b inside t's range)."""
    grid = np.union1d(t[(t > a) & (t < b)], [a, b])
    v = np.interp(grid, t, y)
    return float(np.sum(0.5 * (v[1:] + v[:-1]) * np.diff(grid)) / (b - a))


def _trapezoid_cells(y):
    """Per-cell trapezoid means of nodal values (NX - 1 cells)."""
    return 0.5 * (y[1:] + y[:-1])


def current_profiles(sim) -> dict:
    """Nodal and face currents of the simulation's current state, in A/m: ``nodal`` j_i (the
    profiles' j_total) and ``face`` h_{i+1/2}, i = -1..NX-1, the conserved WENO face fluxes of a1 Phi
    summed over valleys, subbands, w and phi, up to a constant (their differences are exact; the
    constant is fixed so that their mean equals the trapezoid mean of the nodal current)."""
    m, be, st = sim.model, sim.backend, sim.state
    W = scattering.overlap(m, be, st.chi)
    div = be.to_numpy(bte.x_term(m, be, st.Phi, sim.stage_data(st, W)).sum(axis=(3, 4)))  # (NX, 3, N_sbn)
    jscale = VALLEY_DEGENERACY * m.dw * m.dphi * m.scales.j
    steps = div.sum(axis=(1, 2)) * m.dx * jscale  # h_{i+1/2} - h_{i-1/2}
    face = np.concatenate([[0.0], np.cumsum(steps)])
    nodal = VALLEY_DEGENERACY * sim.scalar_fields(st)["j_x"] * m.scales.j
    mean = float(np.sum(_trapezoid_cells(nodal)) / (len(nodal) - 1))
    face += mean - face.mean()
    return {"nodal": nodal, "face": face, "mean": mean}


def junction_nodes(model) -> list[int]:
    """x nodes within two nodes of a doping step (the step lies between the last high-doped node
    of the source and the first channel node, and between the last channel node and the first of
    the drain): where the nodal current deviates (docs/iv.md)."""
    nd = model.N_D.max(axis=1)
    step = np.flatnonzero(np.diff(nd) != 0)
    return sorted({int(i) for s in step for i in range(s - 1, s + 3) if 0 <= i < model.NX})


def spreads(sim) -> dict:
    """Final residuals of the current profile: the largest relative deviation from the mean of
    the nodal j (all nodes; away from the junction nodes; the two contacts) and of the face
    currents (relative to max(|<j>|, floor))."""
    p = current_profiles(sim)
    floor = sim.cfg["steady"]["current_floor_A_per_m"]
    scale = max(abs(p["mean"]), floor)
    nodal, face = p["nodal"], p["face"]
    away = np.setdiff1d(np.arange(len(nodal)), junction_nodes(sim.model))
    return {"nodal_all": float(np.max(np.abs(nodal - p["mean"])) / scale),
            "nodal_away_from_junctions": float(np.max(np.abs(nodal[away] - p["mean"])) / scale),
            "contacts": float(abs(nodal[-1] - nodal[0]) / scale),
            "face": float((face.max() - face.min()) / scale)}
