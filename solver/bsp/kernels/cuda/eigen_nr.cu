// The eigenvalues of ITER (phase eigen, variant numerics.eigen = newton; launched by
// eigen.py: eigenvalues_nr) by a warm-started, bisection-safeguarded Newton-Raphson iteration on
// the characteristic polynomial (paper 001, section 4.2), one CUDA thread per (i, nu, p) as the
// kernel ``eigenvalues`` of eigen.cu.  No defines: N is a run-time argument (one compile per
// machine, not per mesh).
//
// T = T_{nu,i}: d_j = kd[nu][j] - V[i][j+1] - Vc[j], e_j = ko[nu][j]  (j < N; e_{N-1} = 0).
// One evaluation at x runs the LDL^T pivots of T - x I (the Sturm sequence of
// schrodinger.sturm_count, LAPACK's pivmin guard) together with their x-derivatives:
//     q_0 = d_0 - x,  q_j = d_j - x - e_{j-1}^2 / q_{j-1},   q'_0 = -1,  q'_j = -1 + e_{j-1}^2 q'_{j-1} / q_{j-1}^2
// count(x) = #{q_j < 0} = #eigenvalues below x, and det(T - x I) = prod q_j, so the Newton step
// on the characteristic polynomial p(x) is  x <- x - p / p' = x - 1 / sum_j q'_j / q_j.
//
// Safeguard: [lo, hi] always brackets eigenvalue p (count(lo) <= p < count(hi)); it starts as
// the Gershgorin interval and every evaluation shrinks it.  A Newton step that leaves the
// bracket, or a non-finite one, is replaced by a bisection step.  Two Newton steps in a ratio
// of ~1/2 (the signature of a double root: a degenerate pair of levels) are followed by a double
// step, which restores quadratic convergence there.  When the Newton step is below
// tol / 2 the next point is put tol / 2 beyond the predicted root: if its count confirms the
// root, the bracket is narrower than tol and the iteration stops (result: the bracket's
// midpoint); after a failed confirmation (rounding in the predicted root) the offset doubles
// until one confirms.  Newton drawn to a neighbouring eigenvalue leaves the bracket after the
// failed confirmation, so bisection takes over.  tol = 4 DBL_EPSILON max(|lo|, |hi|) of the Gershgorin interval: the
// counts themselves are exact only to ~ DBL_EPSILON ||T|| (the pivots are backward stable with
// respect to d_j - x), so a smaller tol buys nothing.
//
// warm = 0 (no previous levels): the bisection of eigen.cu's ``eigenvalues`` kernel, the same
// operations in the same order (bitwise equal).  warm = 1: Newton-Raphson from eps_prev[t]
// (clamped into the Gershgorin interval).  Thread p = 0 of each (i, nu) also stores the diagonal
// of T in Dg (for the ipim kernels); iters[t] = Sturm evaluations used.
//
// The matrix size N is a run-time argument (no per-mesh compile); d and e are recomputed from
// global memory (L1-resident: one V row per 3 N_sbn threads) in every evaluation.

#define DBL_EPSILON_NR 2.220446049250313e-16
#define NR_MAXIT 400

extern "C" __global__ void eigenvalues_nr(
    const double* __restrict__ V,         // (NX, NZ)
    const double* __restrict__ kd,        // (3, N)   kinetic diagonal per valley
    const double* __restrict__ ko,        // (3, N-1) off-diagonal per valley
    const double* __restrict__ Vc,        // (N,)     V_c at the interior nodes
    const double* __restrict__ eps_prev,  // (NX, 3, NS) previous levels (read only when warm)
    const double pivmin, const int N, const int NX, const int NZ, const int NS, const int warm,
    double* __restrict__ eps,             // (NX, 3, NS)
    double* __restrict__ Dg,              // (NX, 3, N)
    int* __restrict__ iters)              // (NX, 3, NS)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= NX * 3 * NS) return;
    int p = t % NS;
    int nu = (t / NS) % 3;
    int i = t / (3 * NS);
    const double* kdv = kd + nu * N;
    const double* kov = ko + nu * (N - 1);
    const double* Vr = V + (size_t)i * NZ + 1;
#define DIAG(j) (kdv[j] - Vr[j] - Vc[j])
#define OFF(j) ((j) < N - 1 ? kov[j] : 0.0)
    if (p == 0) for (int j = 0; j < N; ++j) Dg[((size_t)i * 3 + nu) * N + j] = DIAG(j);
    double lo = DIAG(0) - fabs(OFF(0)), hi = DIAG(0) + fabs(OFF(0));
    for (int j = 1; j < N; ++j) {
        double r = fabs(OFF(j - 1)) + fabs(OFF(j));
        lo = fmin(lo, DIAG(j) - r);
        hi = fmax(hi, DIAG(j) + r);
    }
    double w = hi - lo;
    lo -= 2.0 * DBL_EPSILON_NR * w + pivmin;
    hi += 2.0 * DBL_EPSILON_NR * w + pivmin;
    int it = 0;
    if (!warm) {
        for (; it < 200; ++it) {
            double mid = 0.5 * (lo + hi);
            if (mid <= lo || mid >= hi) break;
            double q = DIAG(0) - mid;
            if (fabs(q) < pivmin) q = -pivmin;
            int c = q < 0.0;
            for (int j = 1; j < N; ++j) {
                double e = OFF(j - 1);
                q = DIAG(j) - mid - e * e / q;
                if (fabs(q) < pivmin) q = -pivmin;
                c += q < 0.0;
            }
            if (c > p) hi = mid; else lo = mid;
        }
        eps[t] = 0.5 * (lo + hi);
        iters[t] = it;
        return;
    }
    const double tol = 4.0 * DBL_EPSILON_NR * fmax(fabs(lo), fabs(hi));
    double x = eps_prev[t];
    if (!(x > lo && x < hi)) x = 0.5 * (lo + hi);
    int certifying = 0;
    double offset = 0.5 * tol, prev_step = 0.0;
    for (; it < NR_MAXIT; ++it) {
        // one Sturm evaluation with derivatives at x
        double q = DIAG(0) - x, dq = -1.0;
        if (fabs(q) < pivmin) q = -pivmin;
        int c = q < 0.0;
        double s = dq / q;
        for (int j = 1; j < N; ++j) {
            double e = OFF(j - 1);
            double e2q = e * e / q;
            dq = -1.0 + e2q * dq / q;
            q = DIAG(j) - x - e2q;
            if (fabs(q) < pivmin) q = -pivmin;
            c += q < 0.0;
            s += dq / q;
        }
        int above = c > p;  // eigenvalue p lies below x
        if (above) hi = x; else lo = x;
        if (hi - lo <= tol) { ++it; break; }
        // after a test point beyond the predicted root: on the other side (confirmed) or not
        if (certifying) offset = (above == certifying - 1) ? 0.5 * tol : 2.0 * offset;
        certifying = 0;
        // s not finite: a pivot vanished, x is an eigenvalue to rounding (step 0: test beside
        // it); s == 0: between eigenvalues, the step is infinite and bisection takes over
        double step = isfinite(s) ? -1.0 / s : 0.0;
        // a double root (a degenerate pair) halves Newton's steps: take the double step
        double ratio = step / prev_step;
        prev_step = step;
        if (ratio > 0.4 && ratio < 0.6) step *= 2.0;
        double xn = x + step;
        if (isfinite(step) && fabs(step) <= 0.5 * tol) {
            // predicted root within tol / 2 of x: test a point offset beyond it, on the far side
            xn = above ? xn - offset : xn + offset;
            certifying = above ? 1 : 2;  // 1: expect "below" (above == 0), 2: expect "above"
        }
        if (!isfinite(xn) || !(xn > lo && xn < hi)) {
            xn = 0.5 * (lo + hi);  // the safeguard: bisection
            certifying = 0;
            prev_step = 0.0;
        }
        x = xn;
    }
    eps[t] = 0.5 * (lo + hi);
    iters[t] = it;
#undef DIAG
#undef OFF
}
