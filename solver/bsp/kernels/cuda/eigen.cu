/* The eigenpairs of ITER (phase eigen), the two kernels of paper 001 (sections 4.2-4.3), one CUDA
   thread per (i, nu, p); launched by eigen.py.  Compiled with -std=c++14 and the defines
   N = NZ - 2 (interior nodes), SIGN_THRESHOLD = schrodinger.SIGN_THRESHOLD, IPIM_B = 0 (kernels
   eigenvalues and ipim_a) or 1 (kernel ipim_b, with MAXM = eigen.ipim_maxm(NS, block)).

   eigenvalues: eigenvalue p by bisection on the Sturm count (the pivots of
                schrodinger.sturm_count, LAPACK's pivmin guard) from Gershgorin bounds to the last
                representable bit; thread p = 0 of each (i, nu) also stores the diagonal of T_{nu,i}.
   ipim:        the eigenvector by inverse iteration: the LU with partial pivoting of T - lam I
                (LAPACK's dgttrf / dgtts2 scheme, as dstein uses it) recomputed in every one of the
                three sweeps and fused with the forward substitution (Algorithm 2 of 001), from a
                fixed start vector, normalised to dz sum chi^2 = 1 with schrodinger.fix_sign's sign
                rule.  Kernel A (ipim_a) reads the matrix (D, E) from global memory in every sweep,
                kernel B (ipim_b) from shared memory, loaded once per block, coalesced.  Both run
                the same body below, so their results are bitwise equal. */
#define DBL_EPSILON 2.220446049250313e-16
extern "C" __global__ void eigenvalues(
    const double* __restrict__ V, const double* __restrict__ kd, const double* __restrict__ ko,
    const double* __restrict__ Vc, const double pivmin, const int NX, const int NZ, const int NS,
    double* __restrict__ eps, double* __restrict__ Dg)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= NX * 3 * NS) return;
    int p = t % NS;
    int nu = (t / NS) % 3;
    int i = t / (3 * NS);
    double d[N], e[N];
    for (int j = 0; j < N; ++j) d[j] = kd[nu * N + j] - V[i * NZ + j + 1] - Vc[j];
    for (int j = 0; j < N - 1; ++j) e[j] = ko[nu * (N - 1) + j];
    e[N - 1] = 0.0;
    if (p == 0) for (int j = 0; j < N; ++j) Dg[(i * 3 + nu) * N + j] = d[j];
    double lo = d[0] - fabs(e[0]), hi = d[0] + fabs(e[0]);
    for (int j = 1; j < N; ++j) {
        double r = fabs(e[j - 1]) + fabs(e[j]);
        lo = fmin(lo, d[j] - r);
        hi = fmax(hi, d[j] + r);
    }
    double w = hi - lo;
    lo -= 2.0 * DBL_EPSILON * w + pivmin;
    hi += 2.0 * DBL_EPSILON * w + pivmin;
    for (int it = 0; it < 200; ++it) {
        double mid = 0.5 * (lo + hi);
        if (mid <= lo || mid >= hi) break;
        double q = d[0] - mid;
        if (fabs(q) < pivmin) q = -pivmin;
        int c = q < 0.0;
        for (int j = 1; j < N; ++j) {
            q = d[j] - mid - e[j - 1] * e[j - 1] / q;
            if (fabs(q) < pivmin) q = -pivmin;
            c += q < 0.0;
        }
        if (c > p) hi = mid; else lo = mid;
    }
    eps[t] = 0.5 * (lo + hi);
}

#if IPIM_B
extern "C" __global__ void ipim_b(
    const double* __restrict__ eps, const double* __restrict__ Dg, const double* __restrict__ ko,
    const double pivmin, const double scale, const int NX, const int NZ, const int NS,
    double* __restrict__ chi)
{
    __shared__ double sd[MAXM * N];
    __shared__ double se[3 * N];
    int nthr = NX * 3 * NS;
    int t0 = blockIdx.x * blockDim.x;
    int m0 = t0 / NS;
    int tl = t0 + (int)blockDim.x - 1;
    if (tl > nthr - 1) tl = nthr - 1;
    int cnt = (tl / NS - m0 + 1) * N;  // the block's matrices are contiguous in Dg: one coalesced copy
    for (int k = threadIdx.x; k < cnt; k += blockDim.x) sd[k] = Dg[(size_t)m0 * N + k];
    for (int k = threadIdx.x; k < 3 * N; k += blockDim.x) {
        int nu = k / N, j = k % N;
        se[k] = (j < N - 1) ? ko[nu * (N - 1) + j] : 0.0;
    }
    __syncthreads();
    int t = t0 + threadIdx.x;
    if (t >= nthr) return;
    int nu = (t / NS) % 3;
    const double* dg = sd + (t / NS - m0) * N;
    const double* eg = se + nu * N;
#define D(j) dg[j]
#define E(j) eg[j]
#else
extern "C" __global__ void ipim_a(
    const double* __restrict__ eps, const double* __restrict__ Dg, const double* __restrict__ ko,
    const double pivmin, const double scale, const int NX, const int NZ, const int NS,
    double* __restrict__ chi)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= NX * 3 * NS) return;
    int nu = (t / NS) % 3;
    int i = t / (3 * NS);
    const double* dg = Dg + (size_t)(i * 3 + nu) * N;
    const double* eg = ko + nu * (N - 1);
#define D(j) dg[j]
#define E(j) ((j) < N - 1 ? eg[j] : 0.0)
#endif
    double lam = eps[t];
    double a[N], u1[N], u2[N], x[N];
    double anorm = 0.0;
    for (int j = 0; j < N; ++j) anorm = fmax(anorm, fabs(D(j) - lam) + fabs(E(j)) + (j ? fabs(E(j - 1)) : 0.0));
    double tiny = fmax(DBL_EPSILON * anorm, pivmin);
    for (int j = 0; j < N; ++j) x[j] = 1.0 + 1e-3 * (double)((j * 7919) % 97) / 97.0;  // fixed start vector
    for (int sweep = 0; sweep < 3; ++sweep) {
        // dgttrf of T - lam I (LAPACK's scheme), fused with the forward substitution L y = P x
        double ak = D(0) - lam, u1k = E(0);
        for (int k = 0; k < N - 1; ++k) {
            double lk = E(k), ak1 = D(k + 1) - lam, u1k1 = E(k + 1);
            u2[k] = 0.0;
            if (fabs(ak) >= fabs(lk)) {
                if (fabs(ak) < tiny) ak = (ak < 0.0) ? -tiny : tiny;
                double f = lk / ak;
                ak1 -= f * u1k;
                a[k] = ak; u1[k] = u1k;
                x[k + 1] -= f * x[k];
            } else {
                double f = ak / lk;
                a[k] = lk;
                double tmp = u1k;
                u1[k] = ak1;
                ak1 = tmp - f * ak1;
                if (k < N - 2) { u2[k] = u1k1; u1k1 = -f * u1k1; }
                tmp = x[k]; x[k] = x[k + 1]; x[k + 1] = tmp - f * x[k];
            }
            ak = ak1; u1k = u1k1;
        }
        if (fabs(ak) < tiny) ak = (ak < 0.0) ? -tiny : tiny;
        a[N - 1] = ak;
        x[N - 1] /= a[N - 1];
        if (N > 1) x[N - 2] = (x[N - 2] - u1[N - 2] * x[N - 1]) / a[N - 2];
        for (int k = N - 3; k >= 0; --k) x[k] = (x[k] - u1[k] * x[k + 1] - u2[k] * x[k + 2]) / a[k];
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

#undef D
#undef E
}
