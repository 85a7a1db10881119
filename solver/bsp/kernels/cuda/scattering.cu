/* Scattering gain and loss coefficient of the BTE (phases scat_gain, scat_loss), launched by
   scattering.py.  Compiled with --fmad=false (tests/test_bsp_kernels_cuda_scattering.py compiles
   this file with g++ -ffp-contract=off). */
extern "C" {

/* ------------------------------------------------------------------ scattering
   block = one row (i, nu, p), blockDim.x = 32 ceil(NW / (32 LPT)) threads, thread t forms the energies
   l = t + j blockDim.x, j = 0 .. LPT-1 (LPT, MAXE >= the pairs of a valley and NS_ = N_sbn set by the
   launcher).  The block first writes the row's table of the (branch, p') pairs of valley nu (branches
   boff[nu] .. boff[nu+1]-1 with (nu', sigma, weight)) to shared memory: the values that do not depend on l
   (gain: delta / dw and weight x W, the PhiHat row of (nu', p') and the interval [la, la + span] of the
   energies l whose node r = delta / dw + l is valid; loss: delta, weight x W and the first l with
   Gamma = delta + w_l >= 0: w increases, so do fl(delta + w_l), the Heaviside factor is 1 from there on); then each thread walks the
   table for its LPT energies (one table read for LPT of them), the NS_ terms of a branch added in the order
   q = 0 .. NS_-1 to the branch sum, which is added to the total: the order of the array code.  Every value
   is formed with the operations of the one-thread-per-output form, so the results are the same bits
   (docs/performance-bte-kernels.md sections 9 and 14):
   * the validity r >= -1/2 and (l_d <= NW-2 or r == NW-1) is -1/2 <= r <= NW-1 (NW >= 2: r < NW-1 gives
     trunc(r) <= NW-2), and r = fl(delta / dw + l) does not decrease with l, so the valid l are an interval,
     found once per pair by bisection with the same r and comparisons;
   * for a valid r the clip of trunc(r) to [0, NW-2] is min(trunc(r), NW-2) (trunc(r) >= -0 there), and its
     integer is the low word of clip + 1.5 2^52 (an exact sum; no conversion instruction); the two PhiHat
     values are read through the read-only path (__ldg) from the row's pointer kept in the table;
   * invalid pairs are not formed at all (the old kernel formed them at l_d = 0 and left them out of the sum). */
#if defined(MAXE) && defined(NS_)
#ifndef LPT
#define LPT 2
#endif
#ifndef NWS
#define NWS 1024  /* the loss's shared copy of w: NW <= NWS (the launcher sets it) */
#endif
#if !defined(__CUDACC__) && !defined(__CUDACC_RTC__)
/* the host build of the tests: the device intrinsic (the low 32 bits of the double's bit pattern) */
static inline int __double2loint(double x) { long long b; memcpy(&b, &x, 8); return (int)b; }
static inline double __ldg(const double* p) { return *p; }
#endif
#define SCAT_EMPTY 0x40000000  /* la of a pair that is valid for no l (l - la < 0) */

struct alignas(16) ScatVal { double d; double c; };          /* delta (/ dw), weight x W */
struct alignas(16) ScatRef { const double* ph; int la; int span; };  /* PhiHat row of (i, nu', p'), valid l */

__global__ void bsp_scat_gain(const double* __restrict__ PH, const double* __restrict__ eps,
                              const double* __restrict__ W, const double* __restrict__ s_w,
                              const int* __restrict__ boff, const int* __restrict__ bnu2,
                              const double* __restrict__ bsig, const double* __restrict__ bw,
                              double* __restrict__ G, int NW, double inv_dw)
{
    __shared__ ScatVal tv[MAXE];
    __shared__ ScatRef tr[MAXE];
    long long row = blockIdx.x;
    int nu = (int)((row / NS_) % 3);
    long long i = row / (3LL * NS_);
    int b0 = boff[nu];
    int ne = (boff[nu + 1] - b0) * NS_;
    double ep = eps[row];
    const double* Wp = W + row * 3 * NS_;  /* W[i, nu, p, :, :] */
    double top = (double)(NW - 1), lmax = (double)(NW - 2);
    for (int e = threadIdx.x; e < ne; e += blockDim.x) {
        int b = b0 + e / NS_;
        int q = e - (e / NS_) * NS_;
        int nu2 = bnu2[b];
        double delta = (ep - eps[(i * 3 + nu2) * NS_ + q]) + bsig[b];
        double td = delta * inv_dw;
        int lo = 0, hi = NW;  /* la: the first l with td + l >= -1/2 (NW if none; none for NaN) */
        while (lo < hi) {
            int mid = (lo + hi) >> 1;
            if (td + (double)mid >= -0.5) hi = mid; else lo = mid + 1;
        }
        int la = lo;
        lo = 0, hi = NW;  /* lb + 1: the first l with not (td + l <= NW-1) (0 for NaN) */
        while (lo < hi) {
            int mid = (lo + hi) >> 1;
            if (!(td + (double)mid <= top)) hi = mid; else lo = mid + 1;
        }
        int lb = lo - 1;
        tv[e].d = td;
        tv[e].c = bw[b] * Wp[nu2 * NS_ + q];
        tr[e].ph = PH + ((i * 3 + nu2) * NS_ + q) * NW;
        tr[e].la = la <= lb ? la : SCAT_EMPTY;
        tr[e].span = la <= lb ? lb - la : 0;
    }
    __syncthreads();
    double lf[LPT], acc[LPT];
    int lj[LPT];
#pragma unroll
    for (int j = 0; j < LPT; ++j) {
        lj[j] = threadIdx.x + j * blockDim.x;
        lf[j] = (double)lj[j];
        acc[j] = 0.0;
    }
    for (int e0 = 0; e0 < ne; e0 += NS_) {
        double sb[LPT];
#pragma unroll
        for (int j = 0; j < LPT; ++j) sb[j] = 0.0;
#pragma unroll
        for (int q = 0; q < NS_; ++q) {
            ScatVal v = tv[e0 + q];
            ScatRef r = tr[e0 + q];
#pragma unroll
            for (int j = 0; j < LPT; ++j) {
                double rr = v.d + lf[j];
                /* l in [la, la + span] (also false for l >= NW: la + span <= NW-1) */
                if ((unsigned)(lj[j] - r.la) <= (unsigned)r.span) {
                    double ld = trunc(rr);
                    double ldc = ld > lmax ? lmax : ld;
                    double t = rr - ldc;
                    const double* ph = r.ph + __double2loint(ldc + 6755399441055744.0);  /* ldc + 1.5 2^52: exact */
                    double f0 = __ldg(ph);
                    double f1 = __ldg(ph + 1);
                    f1 -= f0;
                    f1 *= t;
                    f1 += f0;
                    sb[j] += v.c * f1;
                }
            }
        }
#pragma unroll
        for (int j = 0; j < LPT; ++j) acc[j] += sb[j];
    }
#pragma unroll
    for (int j = 0; j < LPT; ++j)
        if (lj[j] < NW) G[row * NW + lj[j]] = acc[j] * s_w[nu * NW + lj[j]];
}

__global__ void bsp_scat_loss(const double* __restrict__ eps, const double* __restrict__ W,
                              const double* __restrict__ w, const int* __restrict__ boff,
                              const int* __restrict__ bnu2, const double* __restrict__ bsig,
                              const double* __restrict__ bw, double* __restrict__ Lc, int NW, double c2a)
{
    __shared__ ScatVal tv[MAXE];
    __shared__ int tl[MAXE];
    __shared__ double ws[NWS];  /* w, NW <= NWS */
    long long row = blockIdx.x;
    int nu = (int)((row / NS_) % 3);
    long long i = row / (3LL * NS_);
    int b0 = boff[nu];
    int ne = (boff[nu + 1] - b0) * NS_;
    double ep = eps[row];
    const double* Wp = W + row * 3 * NS_;
    for (int l = threadIdx.x; l < NW; l += blockDim.x) ws[l] = w[l];
    __syncthreads();
    for (int e = threadIdx.x; e < ne; e += blockDim.x) {
        int b = b0 + e / NS_;
        int q = e - (e / NS_) * NS_;
        int nu2 = bnu2[b];
        double d = (ep - eps[(i * 3 + nu2) * NS_ + q]) + bsig[b];
        int lo = 0, hi = NW;  /* the first l with d + w_l >= 0 (NW if none): w increases (the launcher checks) */
        while (lo < hi) {
            int mid = (lo + hi) >> 1;
            if (d + ws[mid] >= 0.0) hi = mid; else lo = mid + 1;
        }
        tv[e].d = d;
        tv[e].c = bw[b] * Wp[nu2 * NS_ + q];
        tl[e] = lo;
    }
    __syncthreads();
    double wl[LPT], acc[LPT];
    int lj[LPT];
#pragma unroll
    for (int j = 0; j < LPT; ++j) {
        lj[j] = threadIdx.x + j * blockDim.x;
        wl[j] = lj[j] < NW ? ws[lj[j]] : 0.0;
        acc[j] = 0.0;
    }
    for (int e0 = 0; e0 < ne; e0 += NS_) {
        double sb[LPT];
#pragma unroll
        for (int j = 0; j < LPT; ++j) sb[j] = 0.0;
#pragma unroll
        for (int q = 0; q < NS_; ++q) {
            ScatVal v = tv[e0 + q];
            int la = tl[e0 + q];
#pragma unroll
            for (int j = 0; j < LPT; ++j)
                if (lj[j] >= la) sb[j] += v.c * (1.0 + c2a * (v.d + wl[j]));  /* Gamma = d + w_l >= 0 */
        }
#pragma unroll
        for (int j = 0; j < LPT; ++j) acc[j] += sb[j];
    }
#pragma unroll
    for (int j = 0; j < LPT; ++j)
        if (lj[j] < NW) Lc[row * NW + lj[j]] = acc[j];
}
#endif


/* ------------------------------------------------------------------ overlap (numerics.bte_kernels fast)
   W[i, a, b] = dz sum_{j=1}^{NZ-2} chi_a,j^2 chi_b,j^2, a and b the (nu, p) pairs (NB = 3 N_sbn of them), the
   sum in the order j = 1 .. NZ-2 (symmetric in a and b bit for bit).  block = one x index i (grid = NX blocks,
   blockDim = the launcher's 32 ceil(NB^2 / 32), at most 1024).  The block copies chi[i, :, j0 .. j0+nj-1] (nj
   values of each of the NB rows: contiguous runs, coalesced, OVL_UNROLL independent loads per thread in flight)
   and stores the squares c * c transposed, sq[jj * NBP + a] (NBP = NB | 1: odd, no bank conflicts on either
   side); then thread t forms the pairs p = t, t + blockDim, .. (a = p / NB, b = p % NB) as acc += sq_a * sq_b
   over jj ascending: the same squares and the same products as the one-thread-per-pair form
   ((ca[j] * ca[j]) * (cb[j] * cb[j]), added in the same order; --fmad=false: no contraction), so the same bits
   (that form is kept in tools/bsp/old_kernels/scattering_a7e270b.cu; docs/performance-bte-kernels.md §15).
   nj = the launcher's chunk rows (OVL_TILE / NBP, at most NZ-2): where the interior does not fit in one
   tile it goes through in chunks, the thread's partial sum of a pair kept in W[i, a, b] between chunks (a double
   stored and read back: exact) and multiplied by dz after the last one. */
#ifndef OVL_TILE
#define OVL_TILE 6144  /* doubles: 48 KB, the static shared-memory limit (scattering.py OVL_TILE) */
#endif
#define OVL_UNROLL 4

__global__ void bsp_overlap(const double* __restrict__ chi, double* __restrict__ W, int NB, int NZ, int rows,
                            double dz)
{
    __shared__ double sq[OVL_TILE];
    long long i = blockIdx.x;
    int NBP = NB | 1;
    int np = NB * NB;
    const double* ci = chi + i * NB * NZ;
    double* Wi = W + i * np;
    for (int j0 = 1; j0 < NZ - 1; j0 += rows) {
        int nj = NZ - 1 - j0 < rows ? NZ - 1 - j0 : rows;
        int n = nj * NB;
        if (j0 > 1) __syncthreads();  /* the previous chunk's sums are done with sq */
        for (int k0 = 0; k0 < n; k0 += OVL_UNROLL * blockDim.x) {
            double v[OVL_UNROLL];
#pragma unroll
            for (int u = 0; u < OVL_UNROLL; ++u) {
                int k = k0 + u * blockDim.x + threadIdx.x;
                int a = k / nj;
                v[u] = k < n ? ci[a * NZ + j0 + (k - a * nj)] : 0.0;
            }
#pragma unroll
            for (int u = 0; u < OVL_UNROLL; ++u) {
                int k = k0 + u * blockDim.x + threadIdx.x;
                int a = k / nj;
                if (k < n) sq[(k - a * nj) * NBP + a] = v[u] * v[u];
            }
        }
        __syncthreads();
        int last = j0 + nj >= NZ - 1;
        for (int p = threadIdx.x; p < np; p += blockDim.x) {
            int a = p / NB;
            int b = p - a * NB;
            double acc = j0 == 1 ? 0.0 : Wi[p];
            const double* sa = sq + a;
            const double* sb = sq + b;
#pragma unroll 8
            for (int jj = 0; jj < nj; ++jj) acc += sa[jj * NBP] * sb[jj * NBP];
            Wi[p] = last ? acc * dz : acc;
        }
    }
}

}  /* extern "C" */
