"""docs/iv.md §9: eigenvalues of the semi-discrete 1-D advection d_t g + a d_x g = 0 (a = 1 > 0, x in [0, 1])
with the x-operator of physics.md §7 at linear WENO-5 weights (smooth or tiny data: IS << eps) and the
contact rule: inflow ghosts g_{-k} = r g_0 (k = 1..3), outflow ghosts constant extension.  r = 1 leaves one
neutral mode (a uniform line); r != 1 turns it into a growing (r > 1) or decaying mode of rate ~ c a (r - 1)/dx."""
import numpy as np


def operator(N, r=1.0):
    dx = 1.0 / (N - 1)
    E = np.zeros((N + 6, N))  # padded values (ghosts included) from the N nodes
    for i in range(N):
        E[i + 3, i] = 1.0
    for k in range(3):
        E[k, 0] = r
        E[N + 3 + k, N - 1] = 1.0
    c = np.array([2, -13, 47, 27, -3]) / 60.0  # face l-1/2 from g_{l-3} .. g_{l+1} (left-biased, linear weights)
    H = np.zeros((N + 1, N + 6))
    for l in range(N + 1):
        H[l, l:l + 5] = c
    F = H @ E
    return -(F[1:] - F[:-1]) / dx


if __name__ == "__main__":
    print(" NX      r   largest Re(lambda)   c = Re(lambda) dx/(r-1)   next Re(lambda)")
    for N in (17, 33, 65, 129):
        for r in (1.0, 1.01, 1.02, 0.99):
            ev = np.sort(np.linalg.eigvals(operator(N, r)).real)[::-1]
            c = ev[0] / (N - 1) / (r - 1) if r != 1 else float("nan")
            print(f"{N:4d} {r:6.2f} {ev[0]:18.4f} {c:22.3f} {ev[1]:18.3f}")
