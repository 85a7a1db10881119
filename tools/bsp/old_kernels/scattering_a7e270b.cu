/* Scattering gain and loss coefficient of the BTE (phases scat_gain, scat_loss), launched by
   scattering.py.  Compiled with --fmad=false (tests/test_bsp_kernels_cuda_scattering.py compiles
   this file with g++ -ffp-contract=off). */
extern "C" {

/* ------------------------------------------------------------------ scattering
   block = one row (i, nu, p) and a chunk of blockDim.x energies l (nchunk chunks per row).  The
   block first writes the row's table of the (branch, p') pairs of valley nu (branches boff[nu] ..
   boff[nu+1]-1 with (nu', sigma, weight); MAXE >= pairs and NS_ = N_sbn, set by the launcher) to
   shared memory:
   the values that do not depend on l (delta = (eps_p - eps_p') + sigma, delta / dw, weight x W,
   the PhiHat row of (nu', p')); then each thread walks the table for its l, the NS_ terms of a
   branch formed together (independent loads and products) and then summed in order.  Each value is formed
   with the operations of the one-thread-per-output form in the same order, so the results are the
   same bits (docs/performance-bte-kernels.md section 9). */
#if defined(MAXE) && defined(NS_)
__global__ void bsp_scat_gain(const double* __restrict__ PH, const double* __restrict__ eps,
                              const double* __restrict__ W, const double* __restrict__ s_w,
                              const int* __restrict__ boff, const int* __restrict__ bnu2,
                              const double* __restrict__ bsig, const double* __restrict__ bw,
                              double* __restrict__ G, int NW, int nchunk, double inv_dw)
{
    __shared__ double td[MAXE];  /* delta / dw */
    __shared__ double tc[MAXE];  /* weight x W */
    __shared__ int to[MAXE];     /* PhiHat row offset of (i, nu', p') */
    long long row = blockIdx.x / nchunk;
    int l = (int)(blockIdx.x - row * nchunk) * blockDim.x + threadIdx.x;
    int nu = (int)((row / NS_) % 3);
    long long i = row / (3LL * NS_);
    int b0 = boff[nu];
    int ne = (boff[nu + 1] - b0) * NS_;
    double ep = eps[row];
    const double* Wp = W + row * 3 * NS_;  /* W[i, nu, p, :, :] */
    for (int e = threadIdx.x; e < ne; e += blockDim.x) {
        int b = b0 + e / NS_;
        int q = e - (e / NS_) * NS_;
        int nu2 = bnu2[b];
        double delta = (ep - eps[(i * 3 + nu2) * NS_ + q]) + bsig[b];
        td[e] = delta * inv_dw;
        tc[e] = bw[b] * Wp[nu2 * NS_ + q];
        to[e] = (int)(((i * 3 + nu2) * NS_ + q) * NW);
    }
    __syncthreads();
    if (l >= NW) return;
    double lf = (double)l;
    double top = (double)(NW - 1), lmax = (double)(NW - 2);
    double acc = 0.0;
    for (int e0 = 0; e0 < ne; e0 += NS_) {
        /* the NS_ terms of a branch are independent (formed together), their sum is in order q = 0 .. NS_-1 */
        double v[NS_];
        bool ok[NS_];
#pragma unroll
        for (int q = 0; q < NS_; ++q) {
            int e = e0 + q;
            double rr = td[e] + lf;
            double ld = trunc(rr);
            ok[q] = rr >= -0.5 && (ld <= lmax || rr == top);
            /* clipped; 0 where not valid (also rr NaN or infinite): the loads stay in the row */
            double ldc = !ok[q] ? 0.0 : (ld < 0.0 ? 0.0 : (ld > lmax ? lmax : ld));
            double t = rr - ldc;
            const double* ph = PH + to[e] + (int)ldc;
            double f0 = ph[0];
            double f1 = ph[1];
            f1 -= f0;
            f1 *= t;
            f1 += f0;
            v[q] = tc[e] * f1;
        }
        double sb = 0.0;
#pragma unroll
        for (int q = 0; q < NS_; ++q)
            if (ok[q]) sb += v[q];
        acc += sb;
    }
    G[row * NW + l] = acc * s_w[nu * NW + l];
}

__global__ void bsp_scat_loss(const double* __restrict__ eps, const double* __restrict__ W,
                              const double* __restrict__ w, const int* __restrict__ boff,
                              const int* __restrict__ bnu2, const double* __restrict__ bsig,
                              const double* __restrict__ bw, double* __restrict__ Lc, int NW, int nchunk,
                              double c2a)
{
    __shared__ double td[MAXE];  /* delta */
    __shared__ double tc[MAXE];  /* weight x W */
    long long row = blockIdx.x / nchunk;
    int l = (int)(blockIdx.x - row * nchunk) * blockDim.x + threadIdx.x;
    int nu = (int)((row / NS_) % 3);
    long long i = row / (3LL * NS_);
    int b0 = boff[nu];
    int ne = (boff[nu + 1] - b0) * NS_;
    double ep = eps[row];
    const double* Wp = W + row * 3 * NS_;
    for (int e = threadIdx.x; e < ne; e += blockDim.x) {
        int b = b0 + e / NS_;
        int q = e - (e / NS_) * NS_;
        int nu2 = bnu2[b];
        td[e] = (ep - eps[(i * 3 + nu2) * NS_ + q]) + bsig[b];
        tc[e] = bw[b] * Wp[nu2 * NS_ + q];
    }
    __syncthreads();
    if (l >= NW) return;
    double wl = w[l];
    double acc = 0.0;
    for (int e0 = 0; e0 < ne; e0 += NS_) {
        double v[NS_];
        bool ok[NS_];
#pragma unroll
        for (int q = 0; q < NS_; ++q) {
            double g = td[e0 + q] + wl;
            ok[q] = g >= 0.0;
            v[q] = tc[e0 + q] * (1.0 + c2a * g);
        }
        double sb = 0.0;
#pragma unroll
        for (int q = 0; q < NS_; ++q)
            if (ok[q]) sb += v[q];
        acc += sb;
    }
    Lc[row * NW + l] = acc;
}
#endif


/* ------------------------------------------------------------------ overlap (numerics.bte_graph)
   thread = (i, a, b), a and b the (nu, p) pairs: W = dz sum_{j=1}^{NZ-2} chi_a,j^2 chi_b,j^2 in the
   order j = 1 .. NZ-2 (symmetric in a and b bit for bit). */
__global__ void bsp_overlap(const double* chi, double* W, int NX, int NB, int NZ, double dz)
{
    long long n = (long long)NX * NB * NB;
    long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n) return;
    int b = (int)(tid % NB);
    long long r = tid / NB;
    int a = (int)(r % NB);
    long long i = r / NB;
    const double* ca = chi + (i * NB + a) * NZ;
    const double* cb = chi + (i * NB + b) * NZ;
    double acc = 0.0;
    for (int j = 1; j < NZ - 1; ++j) acc += (ca[j] * ca[j]) * (cb[j] * cb[j]);
    W[tid] = acc * dz;
}

}  /* extern "C" */
