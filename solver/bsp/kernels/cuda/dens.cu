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
