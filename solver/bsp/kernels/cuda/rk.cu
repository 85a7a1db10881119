/* The RK stage update fused with the loss product, the sum of the terms and DENS (phase RK),
   launched by rk.py; compiled with --fmad=false and -DNPHI_=<NPHI> -DLINES=<lines per block>.

   block = LINES whole phi lines (i, nu, p, l), a tile of LINES * NPHI_ contiguous values, read
   and written coalesced.  Per node (H = G - Lc Phi - (x + w + phi terms), FMAs written out, so
   that a host build computes the device's bits):
       s = 0:  Phi^1     = Phi + dt H
       s > 0:  Phi^{s+1} = c0 Phi^0 + c (Phi + dt H)
   The new values also go to shared memory (rows padded to an odd length: no bank conflicts) and
   one thread per line sums them in the order m = 0 .. NPHI-1: PhiHat = dphi sum_m Phi^{s+1}.
   bsp_rho then sums PhiHat over l (one thread per (i, nu, p), l = 0 .. NW-1, the rows staged through
   shared memory): rho = dw sum_l.
   Fixed summation orders: the results do not vary from run to run. */
extern "C" {

#define ROW (NPHI_ | 1)

__global__ void bsp_rk_dens(const double* Phi, const double* Phi0, const double* G,
                            const double* Lc, const double* tx, const double* tw, const double* tp,
                            double* out, double* PhiHat, int nline, int scat, int has0, double dt,
                            double c, double c0, double dphi)
{
    __shared__ double tile[LINES * ROW];
    long long line0 = (long long)blockIdx.x * LINES;
    int nl = nline - line0 < LINES ? (int)(nline - line0) : LINES;
    int n = nl * NPHI_;
    long long base = line0 * NPHI_;
    for (int k = threadIdx.x; k < n; k += blockDim.x) {
        long long q = base + k;
        int j = k / NPHI_;
        double p = Phi[q];
        double h = -((tx[q] + tw[q]) + tp[q]);
        if (scat) h = fma(-Lc[line0 + j], p, h + G[line0 + j]);
        double v = fma(dt, h, p);
        if (has0) v = fma(c0, Phi0[q], c * v);
        out[q] = v;
        tile[j * ROW + (k - j * NPHI_)] = v;
    }
    __syncthreads();
    for (int j = threadIdx.x; j < nl; j += blockDim.x) {
        const double* r = tile + j * ROW;
        double acc = 0.0;
        for (int m = 0; m < NPHI_; ++m) acc += r[m];
        PhiHat[line0 + j] = acc * dphi;
    }
}

/* bsp_rho: rho = dw sum_l PhiHat, per row (i, nu, p) the sum in the order l = 0 .. NW-1 by one
   thread (the bits of the one-thread-per-row form).  block = ``rows`` consecutive rows (the launcher's
   RHO_ROWS, or fewer where rows x NW > RHO_TILE), a contiguous span of rows x NW values: the block's
   threads copy it to shared memory coalesced (RHO_UNROLL independent loads per thread in flight; with
   the launcher's 256 threads one round covers the tile), then thread j < rows adds row j from shared
   memory, the next 8 values read while the current 8 are added.  A row longer than RHO_TILE (rows = 1)
   goes through in chunks of RHO_TILE values, the sum carried over (same order).
   docs/performance-bte-kernels.md §14. */
#define RHO_TILE 2400  /* the one place it is set: rk.py reads this line (_build.define) for its rows per block */
#define RHO_UNROLL 10

__global__ void bsp_rho(const double* __restrict__ PhiHat, double* __restrict__ rho, int nrow, int NW,
                        int rows, double dw)
{
    __shared__ double tile[RHO_TILE];
    long long row0 = (long long)blockIdx.x * rows;
    int nr = nrow - row0 < rows ? (int)(nrow - row0) : rows;
    int cw = rows * NW <= RHO_TILE ? NW : RHO_TILE;  /* values of a row per chunk (< NW: rows = 1) */
    const double* src = PhiHat + row0 * NW;
    double acc = 0.0;
    for (int c0 = 0; c0 < NW; c0 += cw) {
        int w = NW - c0 < cw ? NW - c0 : cw;
        int n = nr * w;  /* contiguous in PhiHat: rows > 1 only where the whole row is one chunk */
        for (int k0 = 0; k0 < n; k0 += RHO_UNROLL * blockDim.x) {
            double v[RHO_UNROLL];
#pragma unroll
            for (int u = 0; u < RHO_UNROLL; ++u) {
                int k = k0 + u * blockDim.x + threadIdx.x;
                v[u] = k < n ? src[c0 + k] : 0.0;
            }
#pragma unroll
            for (int u = 0; u < RHO_UNROLL; ++u) {
                int k = k0 + u * blockDim.x + threadIdx.x;
                if (k < n) tile[k] = v[u];
            }
        }
        __syncthreads();
        if (threadIdx.x < nr) {
            const double* r = tile + threadIdx.x * w;
            int l = 0;
            if (w >= 8) {
                double c[8];
#pragma unroll
                for (int u = 0; u < 8; ++u) c[u] = r[u];
                for (l = 8; l + 8 <= w; l += 8) {
                    double nx[8];
#pragma unroll
                    for (int u = 0; u < 8; ++u) nx[u] = r[l + u];
#pragma unroll
                    for (int u = 0; u < 8; ++u) acc += c[u];  /* values l-8 .. l-1, in order */
#pragma unroll
                    for (int u = 0; u < 8; ++u) c[u] = nx[u];
                }
#pragma unroll
                for (int u = 0; u < 8; ++u) acc += c[u];
            }
            for (; l < w; ++l) acc += r[l];
        }
        __syncthreads();
    }
    if (threadIdx.x < nr) rho[row0 + threadIdx.x] = acc * dw;
}


/* numerics.bte_speculate: (alpha, dt) of a stage for bsp_wphi_rk's from_scal, with alpha = A_eps A_3 formed on
   the device from A_eps that ITER's stage tail left there (not yet read by the host): the product the host forms
   (float(A_eps * model.A3)), bit for bit. */
__global__ void bsp_scal(const double* a_eps, double A3, double dt, double* scal)
{
    scal[0] = a_eps[0] * A3;  /* one rounded product (nothing to contract it with) */
    scal[1] = dt;
}

}  /* extern "C" */
