/* WENO-5 x, w and phi terms of the BTE (phases WENO_x, WENO_w, WENO_phi), launched by weno.py.
   Compiled with --fmad=false: every operation rounds as in the array code (solver/bsp/weno.py),
   so the results equal the NumPy array path bit for bit (tests/test_bsp_kernels_cuda_weno.py
   compiles this file with g++ -ffp-contract=off). */
extern "C" {

/* F(a, b, c, d) of weno._correction, in its order of operations. */
__device__ __forceinline__ double weno_corr(double a, double b, double c, double d, double eps)
{
    double ab = a - b;
    double bc = b - c;
    double cd = c - d;
    double t = a - 3.0 * b;
    double is0 = 13.0 * ab * ab + 3.0 * t * t;
    t = b + c;
    double is1 = 13.0 * bc * bc + 3.0 * t * t;
    t = 3.0 * c - d;
    double is2 = 13.0 * cd * cd + 3.0 * t * t;
    is0 += eps;
    is1 += eps;
    is2 += eps;
    double a0 = 0.1 / (is0 * is0);
    double a1 = 0.6 / (is1 * is1);
    double a2 = 0.3 / (is2 * is2);
    double s = a0 + a1 + a2;
    double out = a0 * (bc - ab) * (1.0 / 3.0);
    a2 -= 0.5 * s;
    out += a2 * (cd - bc) * (1.0 / 6.0);
    out /= s;
    return out;
}

/* Face h_{j-1/2} from the padded values g_{j-3} .. g_{j+2} (weno5_faces). */
__device__ __forceinline__ double weno_face(double g0, double g1, double g2, double g3, double g4,
                                            double g5, int left, double eps)
{
    double Dm2 = g1 - g0, Dm1 = g2 - g1, D0 = g3 - g2, Dp1 = g4 - g3, Dp2 = g5 - g4;
    double h = g2 + g3;
    h *= 7.0;
    h -= g1;
    h -= g4;
    h *= (1.0 / 12.0);
    /* select the stencil, then one correction (no divergence between left- and right-biased
       lines of a warp); h + (-F) == h - F exactly, as weno5_faces' mask form */
    double a = left ? Dm2 : Dp2;
    double b = left ? Dm1 : Dp1;
    double d = left ? Dp1 : Dm1;
    double corr = weno_corr(a, b, D0, d, eps);
    h += left ? corr : -corr;
    return h;
}

/* ------------------------------------------------------------------ x
   thread = (segment, line (nu, p, l, m)); g_k = a1 Phi_k, ghosts g_0 f_left, g_{NX-1} f_right
   flags (3, NW, NPHI): 1 inflow left, 2 inflow right, 4 left-biased. */
__device__ __forceinline__ double gx_val(const double* P, long long sX, int k, int NX, double a,
                                         double gl, double gr)
{
    if (k < 0) return gl;
    if (k > NX - 1) return gr;
    return P[k * sX] * a;
}

__global__ void bsp_weno_dx(const double* Phi, const double* a1, const unsigned char* flags,
                            const double* rho_eq0, const double* rho_eqL, const double* rho0,
                            const double* rhoL, double* out, int NX, int NS, int NW, int NPHI,
                            int closed, int seg, int nseg, double eps, double inv)
{
    long long nline = 3LL * NS * NW * NPHI;
    long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= nline * nseg) return;
    long long line = tid % nline;
    int s = (int)(tid / nline);
    int m = (int)(line % NPHI);
    long long r = line / NPHI;
    int l = (int)(r % NW);
    r /= NW;
    int p = (int)(r % NS);
    int nu = (int)(r / NS);
    int ai = (nu * NW + l) * NPHI + m;
    double a = a1[ai];
    int fl = flags[ai];
    int left = (fl & 4) != 0;
    const double* P = Phi + line;
    long long sX = nline;
    double gl = P[0] * a, gr = P[(long long)(NX - 1) * sX] * a;
    if (!closed) {
        if (fl & 1) gl = gl * (rho_eq0[nu * NS + p] / rho0[nu * NS + p]);
        if (fl & 2) gr = gr * (rho_eqL[nu * NS + p] / rhoL[nu * NS + p]);
    }
    int i0 = s * seg;
    int i1 = i0 + seg < NX ? i0 + seg : NX;
    double g0 = gx_val(P, sX, i0 - 3, NX, a, gl, gr), g1 = gx_val(P, sX, i0 - 2, NX, a, gl, gr),
           g2 = gx_val(P, sX, i0 - 1, NX, a, gl, gr), g3 = gx_val(P, sX, i0, NX, a, gl, gr),
           g4 = gx_val(P, sX, i0 + 1, NX, a, gl, gr), g5 = gx_val(P, sX, i0 + 2, NX, a, gl, gr);
    double fp = weno_face(g0, g1, g2, g3, g4, g5, left, eps);
    if (closed && i0 == 0) fp = 0.0;
    for (int i = i0; i < i1; ++i) {
        g0 = g1; g1 = g2; g2 = g3; g3 = g4; g4 = g5;
        g5 = gx_val(P, sX, i + 3, NX, a, gl, gr);
        double fn = weno_face(g0, g1, g2, g3, g4, g5, left, eps);
        if (closed && i + 1 == NX) fn = 0.0;
        out[line + i * sX] = (fn - fp) * inv;
        fp = fn;
    }
}

/* ------------------------------------------------------------------ w
   thread = (segment, line (i, nu, p, m)); a2 = a1 (-deps_dx); ghost g_{-k}(m) = a2(k-1, m)
   Phi(k-1, m + NPHI/2); constant extension above; top face 0; bottom face (h(m) - h(m'))/2. */
__device__ __forceinline__ double gw_val(const double* Pl, const double* a1n, double md, int k,
                                         int m, int mp, int NW, int NPHI)
{
    if (k < 0) {
        int j = -k - 1;
        return (a1n[j * NPHI + m] * md) * Pl[j * NPHI + mp];
    }
    if (k > NW - 1) k = NW - 1;
    return (a1n[k * NPHI + m] * md) * Pl[k * NPHI + m];
}

__global__ void bsp_weno_dw(const double* Phi, const double* a1, const double* deps, double* out,
                            int NX, int NS, int NW, int NPHI, int seg, int nseg, double eps,
                            double inv)
{
    long long nline = (long long)NX * 3 * NS * NPHI;
    long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= nline * nseg) return;
    long long line = tid % nline;
    int s = (int)(tid / nline);
    int m = (int)(line % NPHI);
    long long ipv = line / NPHI;
    int nu = (int)((ipv / NS) % 3);
    const double* Pl = Phi + ipv * NW * NPHI;
    const double* a1n = a1 + (long long)nu * NW * NPHI;
    double md = -deps[ipv];
    int half = NPHI / 2;
    int mp = (m + half) % NPHI;
    int left = (a1n[m] * md) > 0.0;
    int l0 = s * seg;
    int l1 = l0 + seg < NW ? l0 + seg : NW;
    double g0 = gw_val(Pl, a1n, md, l0 - 3, m, mp, NW, NPHI),
           g1 = gw_val(Pl, a1n, md, l0 - 2, m, mp, NW, NPHI),
           g2 = gw_val(Pl, a1n, md, l0 - 1, m, mp, NW, NPHI),
           g3 = gw_val(Pl, a1n, md, l0, m, mp, NW, NPHI),
           g4 = gw_val(Pl, a1n, md, l0 + 1, m, mp, NW, NPHI),
           g5 = gw_val(Pl, a1n, md, l0 + 2, m, mp, NW, NPHI);
    double fp = weno_face(g0, g1, g2, g3, g4, g5, left, eps);
    if (l0 == 0) {
        /* the partner line's own bottom face (its ghosts take Phi at mp + half) */
        int mpp = (mp + half) % NPHI;
        int leftp = (a1n[mp] * md) > 0.0;
        double hp = weno_face(gw_val(Pl, a1n, md, -3, mp, mpp, NW, NPHI),
                              gw_val(Pl, a1n, md, -2, mp, mpp, NW, NPHI),
                              gw_val(Pl, a1n, md, -1, mp, mpp, NW, NPHI),
                              gw_val(Pl, a1n, md, 0, mp, mpp, NW, NPHI),
                              gw_val(Pl, a1n, md, 1, mp, mpp, NW, NPHI),
                              gw_val(Pl, a1n, md, 2, mp, mpp, NW, NPHI), leftp, eps);
        fp = 0.5 * (fp - hp);
    }
    double* o = out + ipv * NW * NPHI + m;
    for (int l = l0; l < l1; ++l) {
        g0 = g1; g1 = g2; g2 = g3; g3 = g4; g4 = g5;
        g5 = gw_val(Pl, a1n, md, l + 3, m, mp, NW, NPHI);
        double fn = weno_face(g0, g1, g2, g3, g4, g5, left, eps);
        if (l + 1 == NW) fn = 0.0;
        o[(long long)l * NPHI] = (fn - fp) * inv;
        fp = fn;
    }
}

/* ------------------------------------------------------------------ phi
   thread = line (i, nu, p, l); periodic; g+- = ((a3 +- alpha) Phi) 0.5, a3 = a3_factor deps_dx;
   face = h+(left) + h-(right). */
__global__ void bsp_weno_dphi(const double* Phi, const double* a3f, const double* deps,
                              double* out, int NX, int NS, int NW, int NPHI, double alpha,
                              double eps, double inv)
{
    long long nline = (long long)NX * 3 * NS * NW;
    long long line = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (line >= nline) return;
    int l = (int)(line % NW);
    long long ipv = line / NW;
    int nu = (int)((ipv / NS) % 3);
    const double* P = Phi + line * NPHI;
    const double* a3 = a3f + ((long long)nu * NW + l) * NPHI;
    double d = deps[ipv];
    double p0, p1, p2, p3, p4, p5, q0, q1, q2, q3, q4, q5;
#define BSP_GPM(k, gp, gm)                                  \
    {                                                       \
        int mm_ = (k) % NPHI;                               \
        if (mm_ < 0) mm_ += NPHI;                           \
        double a_ = a3[mm_] * d;                            \
        double x_ = P[mm_];                                 \
        gp = ((a_ + alpha) * x_) * 0.5;                     \
        gm = ((a_ - alpha) * x_) * 0.5;                     \
    }
    BSP_GPM(-3, p0, q0)
    BSP_GPM(-2, p1, q1)
    BSP_GPM(-1, p2, q2)
    BSP_GPM(0, p3, q3)
    BSP_GPM(1, p4, q4)
    BSP_GPM(2, p5, q5)
    double fp = weno_face(p0, p1, p2, p3, p4, p5, 1, eps);
    fp += weno_face(q0, q1, q2, q3, q4, q5, 0, eps);
    double* o = out + line * NPHI;
    for (int m = 0; m < NPHI; ++m) {
        p0 = p1; p1 = p2; p2 = p3; p3 = p4; p4 = p5;
        q0 = q1; q1 = q2; q2 = q3; q3 = q4; q4 = q5;
        BSP_GPM(m + 3, p5, q5)
        double fn = weno_face(p0, p1, p2, p3, p4, p5, 1, eps);
        fn += weno_face(q0, q1, q2, q3, q4, q5, 0, eps);
        o[m] = (fn - fp) * inv;
        fp = fn;
    }
#undef BSP_GPM
}

}  /* extern "C" */
