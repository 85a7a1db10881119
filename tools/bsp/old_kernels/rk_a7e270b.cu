/* The RK stage update fused with the loss product, the sum of the terms and DENS (phase RK),
   launched by rk.py; compiled with --fmad=false and -DNPHI_=<NPHI> -DLINES=<lines per block>.

   block = LINES whole phi lines (i, nu, p, l), a tile of LINES * NPHI_ contiguous values, read
   and written coalesced.  Per node (H = G - Lc Phi - (x + w + phi terms), FMAs written out, so
   that a host build computes the device's bits):
       s = 0:  Phi^1     = Phi + dt H
       s > 0:  Phi^{s+1} = c0 Phi^0 + c (Phi + dt H)
   The new values also go to shared memory (rows padded to an odd length: no bank conflicts) and
   one thread per line sums them in the order m = 0 .. NPHI-1: PhiHat = dphi sum_m Phi^{s+1}.
   bsp_rho then sums PhiHat over l (one thread per (i, nu, p), l = 0 .. NW-1): rho = dw sum_l.
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

__global__ void bsp_rho(const double* PhiHat, double* rho, int nrow, int NW, double dw)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= nrow) return;
    const double* ph = PhiHat + (long long)r * NW;
    double acc = 0.0;
    for (int l = 0; l < NW; ++l) acc += ph[l];
    rho[r] = acc * dw;
}

}  /* extern "C" */
