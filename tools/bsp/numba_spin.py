"""compute-only scaling: the WENO correction on L1-resident data, 128 equal items, threads 1..16"""
import sys, time, numpy as np, numba
from numba import njit, prange
from solver.bsp.kernels.numba.weno import _corr

@njit(parallel=True, cache=True, fastmath={"contract"})
def spin(items, reps, out):
    for k in prange(items):
        a = np.empty(260)
        for v in range(260):
            a[v] = 1.0 + 0.001 * ((v * 7 + k) % 13)
        acc = np.zeros(256)
        for r in range(reps):
            for v in range(256):
                acc[v] += _corr(a[v], a[v + 1], a[v + 2], a[v + 3], 1e-6)
        out[k] = acc.sum()

out = np.empty(128)
spin(128, 10, out)
base = None
for t in (1, 2, 4, 8, 16):
    if t > numba.config.NUMBA_NUM_THREADS: break
    numba.set_num_threads(t)
    ts = []
    for _ in range(3):
        s = time.perf_counter(); spin(128, 2000, out); ts.append(time.perf_counter() - s)
    tm = sorted(ts)[1]; base = base or tm
    print(f"spin threads {t:2d}: {tm*1e3:8.1f} ms  speed-up {base/tm:5.2f}  ({128*2000*256/tm/1e9:.2f} G faces/s)", flush=True)
