/* The eigenpairs of ITER, variant numerics.eigen = twisted (launched by eigen.py: eigenvalues_tw,
   ipim_t; docs/performance-iter-eigen.md).  The same algorithms as eigen_nr.cu's eigenvalues_nr and
   eigen.cu's ipim (the same safeguarded Newton-Raphson, the same LU of T - lam I, the same start
   vector, sweeps and sign rule), with shorter dependent chains: both kernels are latency-bound (one
   warp per SM, every thread a sequential recurrence of ~N double divisions per evaluation / sweep).
   Compiled with the defines N = NZ - 2, MAXM (most (i, nu) matrices a block touches),
   SIGN_THRESHOLD = schrodinger.SIGN_THRESHOLD, IPIM_SHARED (0 or 1) and the candidates (0 = off, the
   default; not measured on a device yet, docs/performance-iter-eigen.md §5): TW_RCP (one division
   per node: 1/q kept and multiplied, in both kernels; rounding changes), TW_CARRY (ipim_t's
   substitutions carry x_k in registers; the same operations, the same bits).

   eigenvalues_tw: TWO threads per eigenvalue (lanes 2e, 2e + 1 of one warp).  An evaluation at x is
     the inertia of the twisted factorization T - x I = N_K Delta N_K^T (twist K = N / 2):
       lane 0: the forward pivots q+_j, j < K, of schrodinger.sturm_count's recurrence,
       lane 1: the backward pivots q-_j = d_j - x - e_j^2 / q-_{j+1}, j > K,
       gamma_K = d_K - x - e_{K-1}^2 / q+_{K-1} - e_K^2 / q-_{K+1},
     count(x) = #{q+_j < 0} + #{q-_j < 0} + [gamma_K < 0] (Sylvester: Delta has the inertia of T - x I)
     and det(T - x I) = prod q+ gamma prod q-, so d/dx log|det| = sum q'/q over the three parts; every
     pivot under the pivmin guard of eigen_nr.cu.  Each lane runs N / 2 nodes instead of N; the two
     halves meet by four __shfl_xor_sync, and both lanes then run the same Newton / bisection update
     on the same values (identical decisions).  The Gershgorin interval likewise from the two halves
     (fmin / fmax: exactly eigen_nr.cu's interval).  The pivots differ from the forward ones, so the
     results are not eigen_nr.cu's bits: both bracket eigenvalue p to tol = 4 DBL_EPSILON max(|lo|,
     |hi|).  The block's diagonals d_j = kd - V - V_c (and e) are formed once into shared memory
     (coalesced; the block's first lane of a matrix also stores it in Dg for ipim_t).  The lanes of a
     warp loop until all of its eigenvalues are done (the shuffles need the whole warp), each pair
     updating only until its own convergence: iters counts that pair's evaluations as eigen_nr.cu does.
   ipim_t: one thread per eigenpair, the matrix from global memory as ipim_a (IPIM_SHARED = 1: from
     shared memory as ipim_b, loaded once per block; the same results).  The LU of
     T - lam I (dgttrf's scheme, eigen.cu's operations) is formed once, in the first sweep, fused with
     its forward substitution; the multipliers, pivots and reciprocals 1 / a_k are kept, so sweeps 2
     and 3 substitute only, and every back substitution multiplies by 1 / a_k instead of dividing
     (the one change of rounding against eigen.cu: no division on the chain after the first LU). */
#define DBL_EPSILON_TW 2.220446049250313e-16
#define TW_MAXIT 400
#define FULL_MASK 0xffffffffu

#if N < 3
#error "eigen_tw.cu needs N = NZ - 2 >= 3"
#endif
#define TWIST (N / 2)

// One evaluation's half at x: count, sum q'/q, and this side's term X = e^2 / q (and X' = X q' / q)
// of gamma_K.  h = 0: forward nodes 0 .. K-1 (node j couples to j-1 by e_{j-1}); h = 1: backward nodes
// N-1 .. K+1 (node j couples to j+1 by e_j).  One loop for both lanes (node j = j0 + sg k, coupling
// e_{j+h-1}), so that the two lanes of a pair do not diverge.
__device__ __forceinline__ void tw_half(const double* d, const double* e, double x, double pivmin, int h,
                                        int& c, double& s, double& X, double& Xd)
{
    const int nk = h ? N - 1 - TWIST : TWIST, j0 = h ? N - 1 : 0, sg = 1 - 2 * h;
    double q = d[j0] - x, dq = -1.0;
    if (fabs(q) < pivmin) q = -pivmin;
    c = q < 0.0;
#if TW_RCP
    // candidate (not the default; docs/performance-iter-eigen.md §5): one division per node, 1/q
    // kept and multiplied (three divisions per node otherwise; each FP64 division is a called
    // sequence that does not overlap the next)
    double r = 1.0 / q;
    s = dq * r;
    for (int k = 1; k < nk; ++k) {
        const int j = j0 + sg * k;
        double ee = e[j + h - 1];
        double e2q = ee * ee * r;
        dq = -1.0 + e2q * dq * r;
        q = d[j] - x - e2q;
        if (fabs(q) < pivmin) q = -pivmin;
        r = 1.0 / q;
        c += q < 0.0;
        s += dq * r;
    }
    double ee = e[TWIST + h - 1];
    X = ee * ee * r;
    Xd = X * dq * r;
#else
    s = dq / q;
    for (int k = 1; k < nk; ++k) {
        const int j = j0 + sg * k;
        double ee = e[j + h - 1];
        double e2q = ee * ee / q;
        dq = -1.0 + e2q * dq / q;
        q = d[j] - x - e2q;
        if (fabs(q) < pivmin) q = -pivmin;
        c += q < 0.0;
        s += dq / q;
    }
    double ee = e[TWIST + h - 1];
    X = ee * ee / q;
    Xd = X * dq / q;
#endif
}

// The whole evaluation at x (both lanes of the pair get the same c and s).
__device__ __forceinline__ void tw_eval(const double* d, const double* e, double x, double pivmin, int h,
                                        int& c, double& s)
{
    int cm;
    double sm, Xm, Xdm;
    tw_half(d, e, x, pivmin, h, cm, sm, Xm, Xdm);
    int co = __shfl_xor_sync(FULL_MASK, cm, 1);
    double so = __shfl_xor_sync(FULL_MASK, sm, 1);
    double Xo = __shfl_xor_sync(FULL_MASK, Xm, 1);
    double Xdo = __shfl_xor_sync(FULL_MASK, Xdm, 1);
    // the same operands in the same order on both lanes: forward's first
    double Xf = h ? Xo : Xm, Xb = h ? Xm : Xo, Xdf = h ? Xdo : Xdm, Xdb = h ? Xdm : Xdo;
    double sf = h ? so : sm, sb = h ? sm : so;
    double g = d[TWIST] - x - Xf - Xb;
    if (fabs(g) < pivmin) g = -pivmin;
    double dg = -1.0 + Xdf + Xdb;
    c = cm + co + (g < 0.0);
    s = sf + sb + dg / g;
}

#ifndef TW_KERNEL
#define TW_KERNEL 0  /* 0: both kernels; 1: eigenvalues_tw alone; 2: ipim_t alone (eigen.py builds each in a
                        module of its own, so that a fresh machine compiles the two in parallel threads) */
#endif

#if TW_KERNEL != 2
extern "C" __global__ void eigenvalues_tw(
    const double* __restrict__ V,         // (NX, NZ)
    const double* __restrict__ kd,        // (3, N)
    const double* __restrict__ ko,        // (3, N-1)
    const double* __restrict__ Vc,        // (N,)
    const double* __restrict__ eps_prev,  // (NX, 3, NS) (read only when warm)
    const double pivmin, const int NX, const int NZ, const int NS, const int warm,
    double* __restrict__ eps,             // (NX, 3, NS)
    double* __restrict__ Dg,              // (NX, 3, N)
    int* __restrict__ iters)              // (NX, 3, NS)
{
    __shared__ double sd[MAXM * N];
    __shared__ double se[3 * N];
    const int ne = NX * 3 * NS, nthr = 2 * ne;
    const int t0 = blockIdx.x * blockDim.x;
    const int m0 = (t0 / 2) / NS;
    int tl = t0 + (int)blockDim.x - 1;
    if (tl > nthr - 1) tl = nthr - 1;
    const int cnt = ((tl / 2) / NS - m0 + 1) * N;
    for (int k = threadIdx.x; k < cnt; k += blockDim.x) {
        int m = m0 + k / N, j = k % N;
        int i = m / 3, nu = m % 3;
        double dv = kd[nu * N + j] - V[(size_t)i * NZ + j + 1] - Vc[j];
        sd[k] = dv;
        if (2 * m * NS >= t0) Dg[(size_t)m * N + j] = dv;  // the block holding the matrix's first lane
    }
    for (int k = threadIdx.x; k < 3 * N; k += blockDim.x) {
        int nu = k / N, j = k % N;
        se[k] = (j < N - 1) ? ko[nu * (N - 1) + j] : 0.0;
    }
    __syncthreads();
    const int t = t0 + (int)threadIdx.x;
    const int live = t < nthr;
    const int tt = live ? t : nthr - 2 + (t & 1);  // lanes past the end shadow the last pair
    const int h = tt & 1, ei = tt >> 1;
    const int p = ei % NS, m = ei / NS;
    const double* d = sd + (m - m0) * N;
    const double* e = se + (m % 3) * N;
    // Gershgorin (e_{-1} = 0): forward lane j <= K, backward lane j > K, combined exactly
    double lo = 1.0 / 0.0, hi = -1.0 / 0.0;
    {
        int j = h ? TWIST + 1 : 0, jend = h ? N : TWIST + 1;
        for (; j < jend; ++j) {
            double r = (j ? fabs(e[j - 1]) : 0.0) + fabs(e[j]);
            lo = fmin(lo, d[j] - r);
            hi = fmax(hi, d[j] + r);
        }
        lo = fmin(lo, __shfl_xor_sync(FULL_MASK, lo, 1));
        hi = fmax(hi, __shfl_xor_sync(FULL_MASK, hi, 1));
    }
    double w = hi - lo;
    lo -= 2.0 * DBL_EPSILON_TW * w + pivmin;
    hi += 2.0 * DBL_EPSILON_TW * w + pivmin;
    int it = 0, done = 0;
    if (!warm) {
        // bisection from the Gershgorin interval to the last bit (as eigen.cu's eigenvalues)
        for (;;) {
            double mid = 0.5 * (lo + hi);
            if (!done && (it >= 200 || mid <= lo || mid >= hi)) done = 1;
            if (__reduce_max_sync(FULL_MASK, (unsigned)!done) == 0u) break;
            int c;
            double s;
            tw_eval(d, e, mid, pivmin, h, c, s);
            if (!done) {
                if (c > p) hi = mid; else lo = mid;
                ++it;
            }
        }
    } else {
        const double tol = 4.0 * DBL_EPSILON_TW * fmax(fabs(lo), fabs(hi));
        double x = eps_prev[ei];
        if (!(x > lo && x < hi)) x = 0.5 * (lo + hi);
        int certifying = 0;
        double offset = 0.5 * tol, prev_step = 0.0;
        for (;;) {
            if (!done && it >= TW_MAXIT) done = 1;
            if (__reduce_max_sync(FULL_MASK, (unsigned)!done) == 0u) break;
            int c;
            double s;
            tw_eval(d, e, x, pivmin, h, c, s);
            if (done) continue;
            ++it;
            // from here eigen_nr.cu's update, operation for operation
            int above = c > p;
            if (above) hi = x; else lo = x;
            if (hi - lo <= tol) { done = 1; continue; }
            if (certifying) offset = (above == certifying - 1) ? 0.5 * tol : 2.0 * offset;
            certifying = 0;
            double step = isfinite(s) ? -1.0 / s : 0.0;
            double ratio = step / prev_step;
            prev_step = step;
            if (ratio > 0.4 && ratio < 0.6) step *= 2.0;
            double xn = x + step;
            if (isfinite(step) && fabs(step) <= 0.5 * tol) {
                xn = above ? xn - offset : xn + offset;
                certifying = above ? 1 : 2;
            }
            if (!isfinite(xn) || !(xn > lo && xn < hi)) {
                xn = 0.5 * (lo + hi);
                certifying = 0;
                prev_step = 0.0;
            }
            x = xn;
        }
    }
    if (live && h == 0) {
        eps[ei] = 0.5 * (lo + hi);
        iters[ei] = it;
    }
}

#endif  /* TW_KERNEL != 2 */

#if TW_KERNEL != 1
extern "C" __global__ void ipim_t(
    const double* __restrict__ eps, const double* __restrict__ Dg, const double* __restrict__ ko,
    const double pivmin, const double scale, const int NX, const int NZ, const int NS,
    double* __restrict__ chi)
{
    const int nthr = NX * 3 * NS;
    const int t0 = blockIdx.x * blockDim.x;
#if IPIM_SHARED
    __shared__ double sdg[MAXM * N];
    __shared__ double se[3 * N];
    const int m0 = t0 / NS;
    int tl = t0 + (int)blockDim.x - 1;
    if (tl > nthr - 1) tl = nthr - 1;
    const int cnt = (tl / NS - m0 + 1) * N;
    for (int k = threadIdx.x; k < cnt; k += blockDim.x) sdg[k] = Dg[(size_t)m0 * N + k];
    for (int k = threadIdx.x; k < 3 * N; k += blockDim.x) {
        int nu = k / N, j = k % N;
        se[k] = (j < N - 1) ? ko[nu * (N - 1) + j] : 0.0;
    }
    __syncthreads();
    const int t = t0 + (int)threadIdx.x;
    if (t >= nthr) return;
    const double* dg = sdg + (t / NS - m0) * N;
    const double* eg = se + ((t / NS) % 3) * N;
#define EG(j) eg[j]
#else
    // the matrix from global memory (L1), as ipim_a: without shared memory the L1 keeps the
    // per-thread factors (eigen.cu's ipim_a beat ipim_b on the H200 at every NZ)
    const int t = t0 + (int)threadIdx.x;
    if (t >= nthr) return;
    const double* dg = Dg + (size_t)(t / NS) * N;
    const double* eg = ko + ((t / NS) % 3) * (N - 1);
#define EG(j) ((j) < N - 1 ? eg[j] : 0.0)
#endif
    const double lam = eps[t];
    double u1[N], u2[N], f[N], ra[N], x[N];
    unsigned char piv[N];
    double anorm = 0.0;
    for (int j = 0; j < N; ++j) anorm = fmax(anorm, fabs(dg[j] - lam) + fabs(EG(j)) + (j ? fabs(EG(j - 1)) : 0.0));
    const double tiny = fmax(DBL_EPSILON_TW * anorm, pivmin);
    for (int j = 0; j < N; ++j) x[j] = 1.0 + 1e-3 * (double)((j * 7919) % 97) / 97.0;  // fixed start vector
    for (int sweep = 0; sweep < 3; ++sweep) {
        if (sweep == 0) {
            // dgttrf of T - lam I (eigen.cu's operations), fused with the forward substitution
            double ak = dg[0] - lam, u1k = EG(0);
#if TW_CARRY
            // candidate (bitwise the same operations): x_k carried in a register, not reloaded
            double xk = x[0];
#endif
            for (int k = 0; k < N - 1; ++k) {
                double lk = EG(k), ak1 = dg[k + 1] - lam, u1k1 = EG(k + 1);
                u2[k] = 0.0;
                if (fabs(ak) >= fabs(lk)) {
                    if (fabs(ak) < tiny) ak = (ak < 0.0) ? -tiny : tiny;
#if TW_RCP
                    double rk = 1.0 / ak, fk = lk * rk;  // candidate: one division per node
#else
                    double rk = 1.0 / ak, fk = lk / ak;
#endif
                    ak1 -= fk * u1k;
                    ra[k] = rk; u1[k] = u1k; f[k] = fk; piv[k] = 0;
#if TW_CARRY
                    x[k] = xk;
                    xk = x[k + 1] - fk * xk;
#else
                    x[k + 1] -= fk * x[k];
#endif
                } else {
#if TW_RCP
                    double rk = 1.0 / lk, fk = ak * rk;
#else
                    double rk = 1.0 / lk, fk = ak / lk;
#endif
                    ra[k] = rk;
                    double tmp = u1k;
                    u1[k] = ak1;
                    ak1 = tmp - fk * ak1;
                    if (k < N - 2) { u2[k] = u1k1; u1k1 = -fk * u1k1; }
                    f[k] = fk; piv[k] = 1;
#if TW_CARRY
                    double nx = x[k + 1];
                    x[k] = nx;
                    xk = xk - fk * nx;
#else
                    tmp = x[k]; x[k] = x[k + 1]; x[k + 1] = tmp - fk * x[k];
#endif
                }
                ak = ak1; u1k = u1k1;
            }
#if TW_CARRY
            x[N - 1] = xk;
#endif
            if (fabs(ak) < tiny) ak = (ak < 0.0) ? -tiny : tiny;
            ra[N - 1] = 1.0 / ak;
        } else {
            // the kept factors: L y = P x
#if TW_CARRY
            double xk = x[0];
            for (int k = 0; k < N - 1; ++k) {
                double nx = x[k + 1];
                if (piv[k]) {
                    x[k] = nx; xk = xk - f[k] * nx;
                } else {
                    x[k] = xk; xk = nx - f[k] * xk;
                }
            }
            x[N - 1] = xk;
#else
            for (int k = 0; k < N - 1; ++k) {
                if (piv[k]) {
                    double tmp = x[k]; x[k] = x[k + 1]; x[k + 1] = tmp - f[k] * x[k];
                } else {
                    x[k + 1] -= f[k] * x[k];
                }
            }
#endif
        }
        // U x = y, multiplying by the kept 1 / a_k
#if TW_CARRY
        double x1 = x[N - 1] * ra[N - 1];
        double x0 = (x[N - 2] - u1[N - 2] * x1) * ra[N - 2];
        x[N - 1] = x1;
        x[N - 2] = x0;
        for (int k = N - 3; k >= 0; --k) {
            double xn = (x[k] - u1[k] * x0 - u2[k] * x1) * ra[k];
            x[k] = xn;
            x1 = x0;
            x0 = xn;
        }
#else
        x[N - 1] *= ra[N - 1];
        x[N - 2] = (x[N - 2] - u1[N - 2] * x[N - 1]) * ra[N - 2];
        for (int k = N - 3; k >= 0; --k) x[k] = (x[k] - u1[k] * x[k + 1] - u2[k] * x[k + 2]) * ra[k];
#endif
        double s = 0.0;
        for (int j = 0; j < N; ++j) s += x[j] * x[j];
        s = 1.0 / sqrt(s);
        for (int j = 0; j < N; ++j) x[j] *= s;
    }
    double vmax = 0.0;
    for (int j = 0; j < N; ++j) vmax = fmax(vmax, fabs(x[j]));
    double sg = 1.0;
    for (int j = 0; j < N; ++j) if (fabs(x[j]) > SIGN_THRESHOLD * vmax) { sg = (x[j] < 0.0) ? -1.0 : 1.0; break; }
    double* out = chi + (size_t)t * NZ;
    out[0] = 0.0;
    out[NZ - 1] = 0.0;
    for (int j = 0; j < N; ++j) out[j + 1] = sg * scale * x[j];
#undef EG
}
#endif  /* TW_KERNEL != 1 */
