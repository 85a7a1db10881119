/* Scattering gain and loss coefficient of the BTE (phases scat_gain, scat_loss), launched by
   scattering.py.  Compiled with --fmad=false (tests/test_bsp_kernels_cuda_scattering.py compiles
   this file with g++ -ffp-contract=off). */
extern "C" {

/* ------------------------------------------------------------------ scattering
   thread = (i, nu, p, l); branches of valley nu: boff[nu] .. boff[nu+1]-1 with (nu', sigma, weight). */
__global__ void bsp_scat_gain(const double* PH, const double* eps, const double* W,
                              const double* s_w, const int* boff, const int* bnu2,
                              const double* bsig, const double* bw, double* G, int NX, int NS,
                              int NW, double inv_dw)
{
    long long n = (long long)NX * 3 * NS * NW;
    long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n) return;
    int l = (int)(tid % NW);
    long long r = tid / NW;
    int p = (int)(r % NS);
    r /= NS;
    int nu = (int)(r % 3);
    long long i = r / 3;
    double ep = eps[(i * 3 + nu) * NS + p];
    double lf = (double)l;
    double top = (double)(NW - 1), lmax = (double)(NW - 2);
    const double* Wp = W + ((i * 3 + nu) * NS + p) * 3 * NS;  /* W[i, nu, p, :, :] */
    double acc = 0.0;
    for (int b = boff[nu]; b < boff[nu + 1]; ++b) {
        int nu2 = bnu2[b];
        double sig = bsig[b], gw = bw[b];
        double sb = 0.0;
        for (int q = 0; q < NS; ++q) {
            double delta = (ep - eps[(i * 3 + nu2) * NS + q]) + sig;
            double rr = delta * inv_dw + lf;
            double ld = trunc(rr);
            if (!(rr >= -0.5 && (ld <= lmax || rr == top))) continue;
            double ldc = ld < 0.0 ? 0.0 : (ld > lmax ? lmax : ld);
            double t = rr - ldc;
            const double* ph = PH + ((i * 3 + nu2) * NS + q) * NW + (int)ldc;
            double f0 = ph[0];
            double f1 = ph[1];
            f1 -= f0;
            f1 *= t;
            f1 += f0;
            sb += (gw * Wp[nu2 * NS + q]) * f1;
        }
        acc += sb;
    }
    G[tid] = acc * s_w[nu * NW + l];
}

__global__ void bsp_scat_loss(const double* eps, const double* W, const double* w,
                              const int* boff, const int* bnu2, const double* bsig,
                              const double* bw, double* Lc, int NX, int NS, int NW, double c2a)
{
    long long n = (long long)NX * 3 * NS * NW;
    long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n) return;
    int l = (int)(tid % NW);
    long long r = tid / NW;
    int p = (int)(r % NS);
    r /= NS;
    int nu = (int)(r % 3);
    long long i = r / 3;
    double ep = eps[(i * 3 + nu) * NS + p];
    double wl = w[l];
    const double* Wp = W + ((i * 3 + nu) * NS + p) * 3 * NS;
    double acc = 0.0;
    for (int b = boff[nu]; b < boff[nu + 1]; ++b) {
        int nu2 = bnu2[b];
        double sig = bsig[b], cb = bw[b];
        double sb = 0.0;
        for (int q = 0; q < NS; ++q) {
            double g = ((ep - eps[(i * 3 + nu2) * NS + q]) + sig) + wl;
            if (g >= 0.0) sb += (cb * Wp[nu2 * NS + q]) * (1.0 + c2a * g);
        }
        acc += sb;
    }
    Lc[tid] = acc;
}


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
