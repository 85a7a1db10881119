/* The Frechet kernel of ITER (phase Frechet), launched by frechet.py: F_i(j, j') for every interior
   (i, j, j') in ONE launch, one thread per entry summing the 3 valleys' N_sbn squares (when drho is
   given) and N_sbn (N_sbn-1)/2 pairs (poisson.frechet is the array reference).  Compiled with
   -std=c++14. */
extern "C" __global__ void frechet_kernel(
    const double* __restrict__ eps,    // (NX, 3, NS)
    const double* __restrict__ chi,    // (NX, 3, NS, NZ)
    const double* __restrict__ rho,    // (NX, 3, NS)
    const double* __restrict__ drho,   // (NX, 3, NS) or unused
    const int has_drho, const int NX, const int NZ, const int NS,
    double* __restrict__ F)            // (NX-2, NZ-2, NZ-2)
{
    const int nz = NZ - 2;
    const long long total = (long long)(NX - 2) * nz * nz;
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= total) return;
    const int jp = (int)(t % nz);
    const int j = (int)((t / nz) % nz);
    const int i = (int)(t / ((long long)nz * nz)) + 1;
    double acc = 0.0;
    for (int nu = 0; nu < 3; ++nu) {
        const int base = (i * 3 + nu) * NS;
        const double* c = chi + (size_t)base * NZ;
        for (int p = 0; p < NS; ++p) {
            const double cpj = c[p * NZ + j + 1], cpk = c[p * NZ + jp + 1];
            if (has_drho) acc += 2.0 * drho[base + p] * (cpj * cpj) * (cpk * cpk);
            const double rp = rho[base + p], ep = eps[base + p];
            for (int q = p + 1; q < NS; ++q) {
                const double coef = 4.0 * (rp - rho[base + q]) / (eps[base + q] - ep);
                acc += coef * (cpj * c[q * NZ + j + 1]) * (cpk * c[q * NZ + jp + 1]);
            }
        }
    }
    F[t] = acc;
}
