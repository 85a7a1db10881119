/* density_probe: the two numbers of the stage's density check (Simulation._check_density) in one launch,
   one block: N_s(x) = sum_k rho[x, k] over the K = 3 N_sbn valleys and subbands (in the order of k), then
   out[0] = sum_x N_s(x) (a fixed tree: bitwise repeatable; not finite where rho holds NaN or Inf) and
   out[1] = min_x N_s(x).  Compiled with -std=c++14 and the define NT (threads, a power of two). */
extern "C" __global__ void __launch_bounds__(NT) density_probe(
    const double* __restrict__ rho, const int NX, const int K, double* __restrict__ out)
{
    __shared__ double s_sum[NT];
    __shared__ double s_min[NT];
    double acc = 0.0, lo = 1.0 / 0.0;
    for (int x = threadIdx.x; x < NX; x += NT) {
        double t = 0.0;
        for (int k = 0; k < K; ++k) t += rho[(size_t)x * K + k];
        acc += t;
        lo = t < lo ? t : lo;
    }
    s_sum[threadIdx.x] = acc;
    s_min[threadIdx.x] = lo;
    __syncthreads();
    for (int h = NT / 2; h > 0; h >>= 1) {
        if (threadIdx.x < h) {
            s_sum[threadIdx.x] += s_sum[threadIdx.x + h];
            const double o = s_min[threadIdx.x + h];
            s_min[threadIdx.x] = o < s_min[threadIdx.x] ? o : s_min[threadIdx.x];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out[0] = s_sum[0];
        out[1] = s_min[0];
    }
}

/* scalars_probe: the numbers of a scalars row (dens.scalars_probe) in one launch, one block per x node
   (grid NX, NT threads):
     out[x]          = sum_k rho[x, k] over the K = 3 N_sbn valleys and subbands (in the order of k, thread 0),
     out[NX + x]     = scale sum_(n, p, q) a1[n, q] Phi[x, n, p, q], q over the L = NW NPHI (w, phi) nodes
                       (each thread a strided part, then a fixed tree: bitwise repeatable),
     out[2 NX + 2 c] and out[2 NX + 2 c + 1], c = 0 for x = 0 and c = 1 for x = NX - 1: the min and the max of
                       Phi on that contact node (the launcher combines the two: output.contact_lines); a NaN
                       there gives NaN, as NumPy's min and max do.
   Phi (NX, 3, NS, L) and a1 (3, L) C-contiguous float64.  Compiled with -std=c++14 and the define NT. */
extern "C" __global__ void __launch_bounds__(NT) scalars_probe(
    const double* __restrict__ rho, const double* __restrict__ Phi, const double* __restrict__ a1,
    const int NX, const int K, const int NS, const int L, const double scale, double* __restrict__ out)
{
    __shared__ double s_j[NT];
    __shared__ double s_lo[NT];
    __shared__ double s_hi[NT];
    const int x = blockIdx.x;
    const bool ends = (x == 0) || (x == NX - 1);
    const double* P = Phi + (size_t)x * 3 * NS * L;
    double acc = 0.0, lo = 1.0 / 0.0, hi = -1.0 / 0.0;
    for (int n = 0; n < 3; ++n) {
        for (int p = 0; p < NS; ++p) {
            const double* row = P + ((size_t)n * NS + p) * L;
            for (int q = threadIdx.x; q < L; q += NT) {
                const double v = row[q];
                acc += a1[(size_t)n * L + q] * v;
                if (ends) {
                    lo = (v < lo || v != v) ? v : lo;  /* a NaN stays (NumPy's min and max propagate it) */
                    hi = (v > hi || v != v) ? v : hi;
                }
            }
        }
    }
    s_j[threadIdx.x] = acc;
    s_lo[threadIdx.x] = lo;
    s_hi[threadIdx.x] = hi;
    __syncthreads();
    for (int h = NT / 2; h > 0; h >>= 1) {
        if (threadIdx.x < h) {
            s_j[threadIdx.x] += s_j[threadIdx.x + h];
            const double a = s_lo[threadIdx.x + h], b = s_hi[threadIdx.x + h];
            s_lo[threadIdx.x] = (a < s_lo[threadIdx.x] || a != a) ? a : s_lo[threadIdx.x];
            s_hi[threadIdx.x] = (b > s_hi[threadIdx.x] || b != b) ? b : s_hi[threadIdx.x];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        double t = 0.0;
        for (int k = 0; k < K; ++k) t += rho[(size_t)x * K + k];
        out[x] = t;
        out[NX + x] = scale * s_j[0];
        if (x == 0) {
            out[2 * NX] = s_lo[0];
            out[2 * NX + 1] = s_hi[0];
        }
        if (x == NX - 1) {
            out[2 * NX + 2] = s_lo[0];
            out[2 * NX + 3] = s_hi[0];
        }
    }
}
