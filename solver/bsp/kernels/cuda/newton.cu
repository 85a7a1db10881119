/* The Newton system of ITER on the device, launched by newton.py (solver/bsp/blocktri.py is the array
   reference): construct_kernel (phase construct_linsys: the row-equilibrated block form in one
   launch, one thread per block entry; construct_rhs: its b alone), the Newton glue newton_rhs /
   newton_norms (with the stage tail) and the prediction iter_start (--fmad=false).  The block
   cyclic reduction of phase solve_linsys is cyclic_reduction.cu.  Compiled with -std=c++14. */
extern "C" __global__ void construct_kernel(
    const double* __restrict__ D0,     // (NX, NZ, NZ) static blocks, unscaled
    const double* __restrict__ lo0,    // (NX, NZ)
    const double* __restrict__ up0,    // (NX, NZ)
    const double* __restrict__ F,      // (NX-2, NZ-2, NZ-2)
    const double* __restrict__ rhs,    // (NX-2, NZ-2)
    const double* __restrict__ bflat,  // (NX, NZ)
    const double cpdz, const int NX, const int NZ,
    double* __restrict__ D, double* __restrict__ lo, double* __restrict__ up, double* __restrict__ b)
{
    const long long total = (long long)NX * NZ * NZ;
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= total) return;
    const int nz = NZ - 2;
    const int c = (int)(t % NZ);
    const int r = (int)((t / NZ) % NZ);
    const int i = (int)(t / ((long long)NZ * NZ));
    const bool in_r = i > 0 && i < NX - 1 && r > 0 && r < NZ - 1;
    const size_t fr = ((size_t)(i - 1) * nz + (r - 1)) * nz;  // only used when in_r
    const size_t row = ((size_t)i * NZ + r) * NZ;
    double dg = D0[row + r];
    if (in_r) dg += cpdz * F[fr + r - 1];
    double v = D0[t];
    if (in_r && c > 0 && c < NZ - 1) v += cpdz * F[fr + c - 1];
    const double s = 1.0 / dg;
    D[t] = v * s;
    if (c == 0) {
        const int k = i * NZ + r;
        lo[k] = lo0[k] * s;
        up[k] = up0[k] * s;
        b[k] = (in_r ? rhs[(size_t)(i - 1) * nz + r - 1] : bflat[k]) * s;
    }
}

// b of construct_kernel alone (poisson.linsys_rhs: the kept Jacobian's iterations), one thread per row
// (i, r): construct_kernel's statements for b (same options, so the same bits)
extern "C" __global__ void construct_rhs(
    const double* __restrict__ D0,     // (NX, NZ, NZ) static blocks, unscaled
    const double* __restrict__ F,      // (NX-2, NZ-2, NZ-2)
    const double* __restrict__ rhs,    // (NX-2, NZ-2)
    const double* __restrict__ bflat,  // (NX, NZ)
    const double cpdz, const int NX, const int NZ, double* __restrict__ b)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= NX * NZ) return;
    const int nz = NZ - 2;
    const int r = k % NZ;
    const int i = k / NZ;
    const bool in_r = i > 0 && i < NX - 1 && r > 0 && r < NZ - 1;
    const size_t fr = ((size_t)(i - 1) * nz + (r - 1)) * nz;  // only used when in_r
    const size_t row = ((size_t)i * NZ + r) * NZ;
    double dg = D0[row + r];
    if (in_r) dg += cpdz * F[fr + r - 1];
    const double s = 1.0 / dg;
    b[k] = (in_r ? rhs[(size_t)(i - 1) * nz + r - 1] : bflat[k]) * s;
}

// rhs of the interior rows: -c_p (N - N_D) + c_p dz sum_j' F_i(j, j') V(i, j'), one thread per (i, j)
extern "C" __global__ void newton_rhs(
    const double* __restrict__ F, const double* __restrict__ V, const double* __restrict__ N,
    const double* __restrict__ ND, const double cp, const double cpdz, const int NXg, const int NZg,
    double* __restrict__ rhs)
{
    const int nz = NZg - 2;
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (NXg - 2) * nz) return;
    const int j = t % nz, i = t / nz + 1;
    const double* f = F + (size_t)t * nz;
    const double* v = V + (size_t)i * NZg + 1;
    double s = 0.0;
    for (int q = 0; q < nz; ++q) s += f[q] * v[q];
    const int g = i * NZg + j + 1;
    rhs[t] = -cp * (N[g] - ND[g]) + cpdz * s;
}

// Newton norms in one block: out = [max|dV|, sum dV^2, max|dN|, sum dN^2, all finite(x)]
// (NaN propagates through the maxima and the sums).  With tail != 0 also the tail of the stage's ITER
// for the new iterate (deps_dx_max below, the same operations): d = d eps/dx of eps (NX, m),
// out[5] = max |d|, out[6] = all finite(Vn); one kernel for newton_norms and newton_norms_tail, so
// the norms are the same bits in both.
#define NT 1024
extern "C" __global__ void newton_norms(
    const double* __restrict__ Vn, const double* __restrict__ Vo, const double* __restrict__ Nn,
    const double* __restrict__ No, const double* __restrict__ x, const int n, double* __restrict__ out,
    const int tail, const double* __restrict__ eps, const int NX, const int m, const double dx,
    const double two_dx, double* __restrict__ d)
{
    __shared__ double sh[4][NT];
    __shared__ int fin[NT];
    double m0 = 0.0, s0 = 0.0, m1 = 0.0, s1 = 0.0;
    int f = 1;
    for (int k = threadIdx.x; k < n; k += NT) {
        const double dv = Vn[k] - Vo[k], dn = Nn[k] - No[k];
        const double av = fabs(dv), an = fabs(dn);
        m0 = (av > m0 || av != av) ? av : m0;
        m1 = (an > m1 || an != an) ? an : m1;
        s0 += dv * dv;
        s1 += dn * dn;
        if (!isfinite(x[k])) f = 0;
    }
    sh[0][threadIdx.x] = m0; sh[1][threadIdx.x] = s0; sh[2][threadIdx.x] = m1; sh[3][threadIdx.x] = s1;
    fin[threadIdx.x] = f;
    __syncthreads();
    for (int st = NT / 2; st > 0; st >>= 1) {
        if (threadIdx.x < st) {
            const int o = threadIdx.x + st;
            double a = sh[0][threadIdx.x], c = sh[0][o];
            sh[0][threadIdx.x] = (c > a || c != c) ? c : a;
            a = sh[2][threadIdx.x]; c = sh[2][o];
            sh[2][threadIdx.x] = (c > a || c != c) ? c : a;
            sh[1][threadIdx.x] += sh[1][o];
            sh[3][threadIdx.x] += sh[3][o];
            fin[threadIdx.x] &= fin[o];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out[0] = sh[0][0]; out[1] = sh[1][0]; out[2] = sh[2][0]; out[3] = sh[3][0];
        out[4] = fin[0] ? 1.0 : 0.0;
    }
    if (!tail) return;  // uniform over the block
    __syncthreads();  // thread 0 has read sh and fin
    double mx = 0.0;
    for (int k = threadIdx.x; k < NX * m; k += NT) {
        const int i = k / m;
        double v;
        if (i == 0) v = (eps[k + m] - eps[k]) / dx;
        else if (i == NX - 1) v = (eps[k] - eps[k - m]) / dx;
        else v = (eps[k + m] - eps[k - m]) / two_dx;
        d[k] = v;
        const double a = fabs(v);
        mx = (a > mx || a != a) ? a : mx;
    }
    int fv = 1;
    for (int k = threadIdx.x; k < n; k += NT)
        if (!isfinite(Vn[k])) fv = 0;
    sh[0][threadIdx.x] = mx;
    fin[threadIdx.x] = fv;
    __syncthreads();
    for (int st = NT / 2; st > 0; st >>= 1) {
        if (threadIdx.x < st) {
            const double a = sh[0][threadIdx.x], c = sh[0][threadIdx.x + st];
            sh[0][threadIdx.x] = (c > a || c != c) ? c : a;
            fin[threadIdx.x] &= fin[threadIdx.x + st];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out[5] = sh[0][0];
        out[6] = fin[0] ? 1.0 : 0.0;
    }
}

// The tail of a stage's ITER (schrodinger.deps_dx_max), one block: d = d eps/dx (central inside,
// one-sided at the ends, the array code's operations), out = [max |d| (NaN propagates),
// isfinite(sum V)].  eps and d are (NX, m) with m = 3 N_sbn; V has nv entries.
extern "C" __global__ void deps_dx_max(
    const double* __restrict__ eps, const double* __restrict__ V, const int NX, const int m, const int nv,
    const double dx, const double two_dx, double* __restrict__ d, double* __restrict__ out)
{
    __shared__ double sh[NT];
    __shared__ int fin[NT];
    double mx = 0.0;
    for (int k = threadIdx.x; k < NX * m; k += NT) {
        const int i = k / m;
        double v;
        if (i == 0) v = (eps[k + m] - eps[k]) / dx;
        else if (i == NX - 1) v = (eps[k] - eps[k - m]) / dx;
        else v = (eps[k + m] - eps[k - m]) / two_dx;
        d[k] = v;
        const double a = fabs(v);
        mx = (a > mx || a != a) ? a : mx;
    }
    int f = 1;
    for (int k = threadIdx.x; k < nv; k += NT)
        if (!isfinite(V[k])) f = 0;
    sh[threadIdx.x] = mx;
    fin[threadIdx.x] = f;
    __syncthreads();
    for (int st = NT / 2; st > 0; st >>= 1) {
        if (threadIdx.x < st) {
            const double a = sh[threadIdx.x], c = sh[threadIdx.x + st];
            sh[threadIdx.x] = (c > a || c != c) ? c : a;
            fin[threadIdx.x] &= fin[threadIdx.x + st];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out[0] = sh[0];
        out[1] = fin[0] ? 1.0 : 0.0;
    }
}

// The prediction of a stage's POTENTIAL start (poisson.iter_start, numerics.iter_start = extrapolate),
// one thread per node, the array code's operations in its order; compiled with --fmad=false (no
// contraction), so bit for bit the array code.  s: the stage (0, 1, 2); last: whether the last step
// (L0 = V^(n-1), L1 = V^(1)_o, dt_o) is there (s = 0 needs it); c = dt^2 / 4 (s = 1) or dt^2 / 3 (s = 2),
// c23 = 2/3, c13 = 1/3 as the host rounds them.  Unused inputs may be any array of n entries.
extern "C" __global__ void iter_start(
    const double* __restrict__ Vn, const double* __restrict__ V1, const double* __restrict__ V2,
    const double* __restrict__ L0, const double* __restrict__ L1, const int s, const int last,
    const double dt, const double dt_o, const double c, const double c23, const double c13, const int n,
    double* __restrict__ out)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n) return;
    const double vn = Vn[k];
    double v;
    if (s == 0) {
        const double d_o = (L1[k] - L0[k]) / dt_o;
        v = vn + dt * (2.0 * (vn - L0[k]) / dt_o - d_o);
    } else {
        const double v1 = V1[k];
        if (s == 1) v = 0.5 * (vn + v1);
        else v = c23 * (v1 + V2[k]) - c13 * vn;
        if (last) {
            const double d_o = (L1[k] - L0[k]) / dt_o;
            const double v2nd = ((v1 - vn) / dt - d_o) / dt_o;
            v = v + c * v2nd;
        }
    }
    out[k] = v;
}
