/* numerics.iter_graph (iter_graph.py): the density of ITER inside the stage's CUDA graph, where CuPy's
   einsum (a cuBLAS call, refused during a capture) cannot run.  Compiled with -std=c++14. */

// N(i, z) = 2 sum_k rho(i, k) chi(i, k, z)^2, k = (nu, p) over the 3 N_sbn levels of column i
// (poisson.density: 2 einsum("ivp,ivpz->iz", rho, chi * chi)); one thread per (i, z); the sum in
// the order k = 0, 1, ... with one fused multiply-add per term (chi^2 rounded first, as the array
// code forms chi * chi before the contraction)
extern "C" __global__ void iter_density(
    const double* __restrict__ rho,  // (NX, K)
    const double* __restrict__ chi,  // (NX, K, NZ)
    const int NX, const int K, const int NZ,
    double* __restrict__ N)          // (NX, NZ)
{
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= NX * NZ) return;
    const int i = t / NZ, z = t % NZ;
    const double* r = rho + (size_t)i * K;
    const double* c = chi + (size_t)i * K * NZ + z;
    double acc = 0.0;
    for (int k = 0; k < K; ++k) {
        const double c2 = c[(size_t)k * NZ] * c[(size_t)k * NZ];
        acc = fma(r[k], c2, acc);
    }
    N[t] = 2.0 * acc;
}
