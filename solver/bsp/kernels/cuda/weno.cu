/* WENO-5 x, w and phi terms of the BTE (phases WENO_x, WENO_w, WENO_phi), launched by weno.py.

   Two variants of the arithmetic (numerics.bte_kernels), both compiled with --fmad=false:
   exact (default build): every operation rounds as in the array code (solver/bsp/weno.py), so
       the results equal the NumPy array path bit for bit (4 IEEE divisions per face);
   fast (-DBSP_WENO_FAST=1): the same WENO-5 weights and epsilon with the FMAs written out as
       fma() and one division per face (alpha_k = d_k / q_k, q_k = (eps + IS_k)^2, put over the
       common denominator q0 q1 q2); within a few ulps of the exact form.  Because the FMAs are
       explicit and nothing else is contracted, a host build (g++ -ffp-contract=off, correctly
       rounded fma) computes the same bits as the device.
   fast2 (-DBSP_WENO_FAST=1 -DBSP_WENO_FAST2=1: bsp_wphi_rk and bsp_weno_dx): the same weights, eps and smoothness
       indicators in fewer FP64 operations (weno2_*: indicators as quadratic forms, faces times 12, one
       correctly rounded reciprocal per w face and per phi face pair); within 1e-12 of the array code, the
       host build computes the device's bits (docs/performance-bte-kernels.md §12).
   The fast build with -DNPHI_=<NPHI> -DLINES=<lines per block> adds bsp_weno_dphi_tile, the
   coalesced phi kernel; with -DNPHI_=<NPHI> -DLROWS=<energy rows per block> bsp_wphi_rk, the w and
   phi terms fused with the RK update and DENS (launched by rk.py). */
extern "C" {

#if BSP_WENO_FAST
/* 0.1, 0.6, 0.3 and 1/12 from constant memory: a constant-bank operand costs no instruction, the
   literals (not encodable as 32-bit immediates) cost two uniform moves per use.  The same values. */
__constant__ double bsp_wk[4] = {0.1, 0.6, 0.3, 1.0 / 12.0};

/* F(a, b, c, d) of weno._correction with one division:
   w_k = n_k / s, n0 = 0.1 q1 q2, n1 = 0.6 q0 q2, n2 = 0.3 q0 q1, s = n0 + n1 + n2;
   F = w0/3 (bc - ab) + (w2 - 1/2)/6 (cd - bc) = [2 n0 (bc - ab) + (n2 - s/2)(cd - bc)] / (6 s).
   Range: q0 q1 stays finite for IS_k < 1e77 (|differences of g| < ~1e38). */
__device__ __forceinline__ double weno_corr(double a, double b, double c, double d, double eps)
{
    double ab = a - b;
    double bc = b - c;
    double cd = c - d;
    double t0 = fma(-3.0, b, a);
    double t1 = b + c;
    double t2 = fma(3.0, c, -d);
    double is0 = fma(13.0 * ab, ab, fma(3.0 * t0, t0, eps));
    double is1 = fma(13.0 * bc, bc, fma(3.0 * t1, t1, eps));
    double is2 = fma(13.0 * cd, cd, fma(3.0 * t2, t2, eps));
    double q0 = is0 * is0, q1 = is1 * is1, q2 = is2 * is2;
    double n0 = bsp_wk[0] * (q1 * q2);
    double n1 = bsp_wk[1] * (q0 * q2);
    double n2 = bsp_wk[2] * (q0 * q1);
    double s = (n0 + n1) + n2;
    double num = fma(2.0 * n0, bc - ab, fma(-0.5, s, n2) * (cd - bc));
    return num / (6.0 * s);
}

/* Face h_{j-1/2} from the padded values g_{j-3} .. g_{j+2} (weno5_faces). */
__device__ __forceinline__ double weno_face(double g0, double g1, double g2, double g3, double g4,
                                            double g5, int left, double eps)
{
    double Dm2 = g1 - g0, Dm1 = g2 - g1, D0 = g3 - g2, Dp1 = g4 - g3, Dp2 = g5 - g4;
    double h = fma(7.0, g2 + g3, -(g1 + g4)) * bsp_wk[3];
    double a = left ? Dm2 : Dp2;
    double b = left ? Dm1 : Dp1;
    double d = left ? Dp1 : Dm1;
    double corr = weno_corr(a, b, D0, d, eps);
    return left ? h + corr : h - corr;
}
#if BSP_WENO_FAST2
/* numerics.bte_kernels: fast2 (docs/performance-bte-kernels.md §12-13), used by bsp_wphi_rk and bsp_weno_dx: the same
   WENO-5 weights d = (1, 6, 3)/10, the same eps and smoothness indicators, fewer FP64 operations (other
   rounding; within 1e-12 of the array code per stage, not bit-equal to fast).
   weno2_parts: numerator and denominator of 12 F(a, b, c, d) = num / s, with
     IS_0 = 13 (a-b)^2 + 3 (a-3b)^2 = 16 a^2 - 44 ab + 40 b^2,
     IS_1 = 13 (b-c)^2 + 3 (b+c)^2  = 16 b^2 - 20 bc + 16 c^2,
     IS_2 = 13 (c-d)^2 + 3 (3c-d)^2 = 40 c^2 - 44 cd + 16 d^2   (+ eps each, as the array code;
   positive definite forms: no cancellation beyond a few ulps), q_k = IS_k^2, the weights scaled by 10
   (n0 = q1 q2, n1 = 6 q0 q2, n2 = 3 q0 q1, s = n0 + n1 + n2 = n0 + q0 (6 q2 + 3 q1)):
     F = [2 n0 (bc - ab) + (n2 - s/2)(cd - bc)] / (6 s) = [4 n0 u + (2 n2 - s) v] / (12 s),
     2 n2 - s = q0 (3 q1 - 6 q2) - n0,  u = bc - ab = 2b - a - c,  v = cd - bc = 2c - b - d.
   Every constant is a 32-bit immediate.  The faces are formed times 12 (12 h + 12 F: no 1/12 and no 12 s)
   and the kernel multiplies their differences by inv / 12.  Reciprocal multiplication: num * rcp(s) with the
   correctly rounded reciprocal __drcp_rn (shorter than the IEEE division: no quotient correction; the host
   build computes the same bits with 1.0 / s). */
#if !defined(__CUDACC__) && !defined(__CUDACC_RTC__)
/* the host build of the tests: the correctly rounded reciprocal of the device intrinsic */
static inline double __drcp_rn(double x) { return 1.0 / x; }
#endif

__device__ __forceinline__ void weno2_parts(double a, double b, double c, double d, double eps,
                                            double& num, double& s)
{
    double b2 = b * b, c2 = c * c;
    double is0 = fma(a, fma(16.0, a, -44.0 * b), fma(40.0, b2, eps));
    double is1 = fma(-20.0 * b, c, fma(16.0, b2 + c2, eps));
    double is2 = fma(d, fma(16.0, d, -44.0 * c), fma(40.0, c2, eps));
    double q0 = is0 * is0, q1 = is1 * is1, q2 = is2 * is2;
    double n0 = q1 * q2;
    double t = 3.0 * q1;
    s = fma(q0, fma(6.0, q2, t), n0);
    double e2 = fma(q0, fma(-6.0, q2, t), -n0);
    double u = fma(2.0, b, -(a + c));
    double v = fma(2.0, c, -(b + d));
    num = fma(4.0 * n0, u, e2 * v);
}

/* 12 x the left-biased face h_{j-1/2} from g_{j-3} .. g_{j+1} (g_{j+2} is not used by it), one reciprocal:
   12 h = 7 (g2 + g3) - (g1 + g4) = 12 g2 + 6 D0 + Dm1 - Dp1.  A right-biased face is this formula on the
   reversed stencil g_{j+2} .. g_{j-2} (F is odd in its arguments, exactly so in floating point): the
   caller reverses the load order instead of selecting the differences. */
__device__ __forceinline__ double weno2_face12(double g0, double g1, double g2, double g3, double g4,
                                               double eps)
{
    double Dm2 = g1 - g0, Dm1 = g2 - g1, D0 = g3 - g2, Dp1 = g4 - g3;
    double num, s;
    weno2_parts(Dm2, Dm1, D0, Dp1, eps, num, s);
    return fma(12.0, g2, fma(6.0, D0, Dm1 - Dp1)) + num * __drcp_rn(s);
}

/* 12 x the phi face m-1/2 of the Lax-Friedrichs pair, h+ (left-biased, on .x) + h- (right-biased, on .y),
   from the angles m-3 .. m+2, with ONE reciprocal: 12 (F+ - F-) = (num+ s- - num- s+) / (s+ s-).
   Range: s+ s- ~ (50 D^2)^8 stays finite for differences D of g below ~1e17 (fast: ~1e38); the launcher
   takes this kernel only for eps >= 1e-30 (s+ s- >= 100 eps^8 > 0). */
__device__ __forceinline__ double weno2_phi_pair12(double2 v0, double2 v1, double2 v2, double2 v3,
                                                   double2 v4, double2 v5, double eps)
{
    double Am2 = v1.x - v0.x, Am1 = v2.x - v1.x, A0 = v3.x - v2.x, Ap1 = v4.x - v3.x;
    double Bm1 = v2.y - v1.y, B0 = v3.y - v2.y, Bp1 = v4.y - v3.y, Bp2 = v5.y - v4.y;
    double nump, sp, numm, sm;
    weno2_parts(Am2, Am1, A0, Ap1, eps, nump, sp);
    weno2_parts(Bp2, Bp1, B0, Bm1, eps, numm, sm);
    double h12 = fma(12.0, v2.x + v2.y, fma(6.0, A0 + B0, (Am1 - Ap1) + (Bm1 - Bp1)));
    return h12 + fma(nump, sm, -(numm * sp)) * __drcp_rn(sp * sm);
}
#endif
#else
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
#endif

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

/* contact ghost of an inflow line: reference g r (r = rho_eq/rho, physics.md section 7); hybrid
   (numerics.contact_rule, docs/iv.md section 12) g min(r, 1) + max(rho_eq - rho, 0) (a1 s_w M), in
   the array code's order of operations (weno.py) */
__device__ __forceinline__ double contact_ghost(double g, double a, double req, double rho, double shp,
                                                int hybrid)
{
    double r = req / rho;
    if (!hybrid) return g * r;
    double rm = (r < 1.0 || r != r) ? r : 1.0;
    double d = req - rho;
    d = (d > 0.0 || d != d) ? d : 0.0;
    return g * rm + d * (a * shp);
}

__global__ void bsp_weno_dx(const double* Phi, const double* a1, const unsigned char* flags,
                            const double* rho_eq0, const double* rho_eqL, const double* rho0,
                            const double* rhoL, double* out, int NX, int NS, int NW, int NPHI,
                            int closed, int seg, int nseg, double eps, double inv,
                            const double* shape, int hybrid)
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
        double shp = hybrid ? shape[nu * NW + l] : 0.0;  /* s_w M of (nu, l) */
        if (fl & 1) gl = contact_ghost(gl, a, rho_eq0[nu * NS + p], rho0[nu * NS + p], shp, hybrid);
        if (fl & 2) gr = contact_ghost(gr, a, rho_eqL[nu * NS + p], rhoL[nu * NS + p], shp, hybrid);
    }
    int i0 = s * seg;
    int i1 = i0 + seg < NX ? i0 + seg : NX;
#if BSP_WENO_FAST2
    /* fast2 (docs/performance-bte-kernels.md section 13): 12 x each face by weno2_face12 on the stencil in upwind
       order, every line walked upwards (the plane of x nodes a warp reads and writes is the same for all its
       lanes), the 5 values of a right-biased face selected in reversed order (5 double selects per face).  The
       downwards walk of right-biased lines (no selects, 2 x planes per warp at a time) measured 32 % slower on
       the H200 (section 13.4). */
    double c12 = inv / 12.0;
    double g0 = gx_val(P, sX, i0 - 3, NX, a, gl, gr), g1 = gx_val(P, sX, i0 - 2, NX, a, gl, gr),
           g2 = gx_val(P, sX, i0 - 1, NX, a, gl, gr), g3 = gx_val(P, sX, i0, NX, a, gl, gr),
           g4 = gx_val(P, sX, i0 + 1, NX, a, gl, gr), g5 = gx_val(P, sX, i0 + 2, NX, a, gl, gr);
#define BSP_XUP_FACE                                                                                      \
    weno2_face12(left ? g0 : g5, left ? g1 : g4, left ? g2 : g3, left ? g3 : g2, left ? g4 : g1, eps)
    double fp = BSP_XUP_FACE;
    if (closed && i0 == 0) fp = 0.0;
    for (int i = i0; i < i1; ++i) {
        g0 = g1; g1 = g2; g2 = g3; g3 = g4; g4 = g5;
        g5 = gx_val(P, sX, i + 3, NX, a, gl, gr);
        double fn = BSP_XUP_FACE;
        if (closed && i + 1 == NX) fn = 0.0;
        out[line + i * sX] = (fn - fp) * c12;
        fp = fn;
    }
#undef BSP_XUP_FACE
#else
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
#endif
}

#if BSP_WENO_FAST2 && defined(XSEG_) && defined(XWARPS) && defined(XNX) && defined(XNS) && defined(XNW) && defined(XNPHI)
/* ------------------------------------------------------------------ x, tile (numerics.wenox_kernel: tile)
   docs/performance-bte-kernels.md sections 19-20.  block = 32 consecutive lines (one per lane: a row of the tile is
   256 contiguous bytes of one x plane) x a segment of XSEG_ x nodes i0 .. i0+n-1 (n <= XSEG_, blockIdx = group *
   nseg + segment), XWARPS warps.  (1) g = a1 Phi of rows i0-3 .. i0+n+2 into shared memory (ghosts as
   bsp_weno_dx: contact_ghost), one row per warp at a time; (2) one thread per face j-1/2, j = i0 .. i0+n:
   weno2_face12 on g_{j-3} .. g_{j+1} (left-biased) or on the reversed stencil g_{j+2} .. g_{j-2} (right-biased),
   the stencil read through a signed row stride (no selects), closed contacts' faces -1/2 and NX-1/2 = 0;
   (3) out_i = (f_{i+1/2} - f_{i-1/2}) * (inv / 12).  The same calls on the same values in the same order as
   bsp_weno_dx fast2's walk: the same bits.  Shared memory 8 * 32 * (2 XSEG_ + 7) B (XSEG_ <= 66: <= 36 KB).
   The mesh sizes are compile-time (-DXNX -DXNS -DXNW -DXNPHI, section 20; no size arguments): the line indices by constant divisions, the row stride a constant, and each staged row classified at
   compile time: only a row that can lie below x = 0 (XROW_LO) or above x = NX - 1 (XROW_HI) in some block is
   clamped and takes a ghost, only a row that some block does not stage (XROW_ALL false) is predicated. */
#define XL 32
#ifndef XFACE_UNROLL
#if (defined(__CUDACC__) || defined(__CUDACC_RTC__)) && defined(XFPT)
#define XFACE_UNROLL _Pragma("unroll 1")  /* -DXFPT=1: one face per loop body (the count of section 19) */
#else
#define XFACE_UNROLL
#endif
#endif
#define XRPT ((XSEG_ + 6 + XWARPS - 1) / XWARPS)  /* rows loaded per thread at most */
#ifndef XMINB
#define XMINB 1  /* -DXMINB=<blocks per SM>: the register budget of that many blocks (counted in section 19) */
#endif
#define XNSEG ((XNX + XSEG_ - 1) / XSEG_)                /* segments per line */
#define XNLINE (3 * XNS * XNW * XNPHI)                    /* lines = the x stride */
#define XNLAST (XNX - (XNSEG - 1) * XSEG_)               /* nodes of the last (shortest) segment */
#ifdef XROWS_GENERIC  /* every row clamped, ghost-selected and predicated (section 20's count of the trims) */
#define XROW_LO(t) 1
#define XROW_HI(t) 1
#define XROW_ALL(t) 0
#else
#define XROW_LO(t) ((t) * XWARPS < 3)  /* row t of warp w: x node i0 - 3 + w + t XWARPS; below 0 only if i0 = 0 */
#define XROW_HI(t) ((XNSEG - 1) * XSEG_ - 4 + XWARPS + (t) * XWARPS > XNX - 1)  /* last segment, w = XWARPS-1 */
#define XROW_ALL(t) ((t) * XWARPS + XWARPS - 1 < XNLAST + 6)  /* staged by every warp of every block */
#endif
__global__ void __launch_bounds__(XL * XWARPS, XMINB)
bsp_weno_dx_tile(const double* __restrict__ Phi, const double* __restrict__ a1,
                 const unsigned char* __restrict__ flags, const double* rho_eq0, const double* rho_eqL,
                 const double* rho0, const double* rhoL, double* __restrict__ out, int closed, double eps,
                 double inv, const double* shape, int hybrid)
{
    __shared__ double gs[(XSEG_ + 6) * XL];  /* g of x node i0 - 3 + r at position r (left-biased), XSEG_ + 5 - r */
    __shared__ double fs[(XSEG_ + 1) * XL];  /* row f = face i0 + f - 1/2, times 12 */
    const long long sX = XNLINE;
    int b = (int)blockIdx.x;
    int grp = b / XNSEG;
    int s = b - grp * XNSEG;
    int lane = (int)threadIdx.x & (XL - 1);
    int w = (int)threadIdx.x / XL;
    int line = grp * XL + lane;
    const bool valid = XNLINE % XL == 0 || line < XNLINE;
    int i0 = s * XSEG_;
    int n = XNX - i0 < XSEG_ ? XNX - i0 : XSEG_;
    const double* P = Phi + line;
    double a = 0.0, gl = 0.0, gr = 0.0;
    int left = 1;
    if (valid) {
        const int wp = XNW * XNPHI;
        int q = line / wp;        /* nu NS + p */
        int rem = line - q * wp;  /* l NPHI + m */
        int nu = q / XNS;
        int ai = nu * wp + rem;   /* (nu NW + l) NPHI + m */
        a = a1[ai];
        int fl = flags[ai];
        left = (fl & 4) != 0;
        /* the ghosts (as bsp_weno_dx's), formed only by the warps whose rows reach below x = 0 (rows r < 3 - i0:
           warps w < 3 - i0) or above x = NX - 1 (the thread's last row, w + XWARPS floor((n + 5 - w) / XWARPS), beyond it) */
        if (w < 3 - i0) {
            gl = P[0] * a;
            if (!closed && (fl & 1))
                gl = contact_ghost(gl, a, rho_eq0[q], rho0[q], hybrid ? shape[nu * XNW + rem / XNPHI] : 0.0, hybrid);
        }
        if (w <= n + 5 && i0 - 3 + w + (n + 5 - w) / XWARPS * XWARPS > XNX - 1) {  /* the thread's last row */
            gr = P[(long long)(XNX - 1) * sX] * a;
            if (!closed && (fl & 2))
                gr = contact_ghost(gr, a, rho_eqL[q], rhoL[q], hybrid ? shape[nu * XNW + rem / XNPHI] : 0.0, hybrid);
        }
        /* rows i0-3 .. i0+n+2, row r by warp r mod XWARPS: first every load of the thread (a row that can lie outside
           0 .. NX-1 clamped into it, so no branch or predicate keeps them apart; the others at a constant stride),
           then the products into shared memory, a row that can be a ghost taking gl or gr */
        const long long o0 = (long long)(i0 - 3 + w) * sX;
        double v[XRPT];
#pragma unroll
        for (int t = 0; t < XRPT; ++t) {
            if (XROW_LO(t) || XROW_HI(t)) {
                int k = i0 - 3 + w + t * XWARPS;
                k = k < 0 ? 0 : (k > XNX - 1 ? XNX - 1 : k);
                v[t] = P[k * sX];
            } else {
                v[t] = P[o0 + t * XWARPS * sX];
            }
        }
        /* a right-biased line's column is stored upside down (row r at position XSEG_ + 5 - r): every face reads 5
           consecutive positions upwards */
        double* sg = gs + (left ? w : XSEG_ + 5 - w) * XL + lane;
        int sst = left ? XWARPS * XL : -XWARPS * XL;
#pragma unroll
        for (int t = 0; t < XRPT; ++t) {
            int r6 = w + t * XWARPS;
            int k = i0 - 3 + r6;
            double gv = v[t] * a;
            if (XROW_LO(t) && k < 0) gv = gl;
            if (XROW_HI(t) && k > XNX - 1) gv = gr;
            if (XROW_ALL(t) || r6 < n + 6) sg[t * sst] = gv;
        }
    }
    __syncthreads();
    if (valid) {
        /* face f: left-biased rows f .. f+4 (positions f .. f+4), right-biased rows f+5 .. f+1 (positions
           XSEG_ - f .. XSEG_ - f + 4) */
        const double* g = gs + (left ? 0 : XSEG_) * XL + lane;
        int st = left ? XL : -XL;
        XFACE_UNROLL for (int f = w; f <= n; f += XWARPS) {
            const double* q = g + f * st;
            double h = weno2_face12(q[0], q[XL], q[2 * XL], q[3 * XL], q[4 * XL], eps);
            int j = i0 + f;
            if (closed && (j == 0 || j == XNX)) h = 0.0;
            fs[f * XL + lane] = h;
        }
    }
    __syncthreads();
    if (valid) {
        double c12 = inv / 12.0;
        double* o = out + line + (long long)i0 * sX;
        for (int r6 = w; r6 < n; r6 += XWARPS)
            o[r6 * sX] = (fs[(r6 + 1) * XL + lane] - fs[r6 * XL + lane]) * c12;
    }
}
#undef XL
#undef XFACE_UNROLL
#undef XMINB
#undef XRPT
#undef XNSEG
#undef XNLINE
#undef XNLAST
#undef XROW_LO
#undef XROW_HI
#undef XROW_ALL
#endif

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

#if defined(NPHI_) && defined(LINES)
/* ------------------------------------------------------------------ phi, coalesced
   block = LINES whole phi lines (i, nu, p, l): the tile of LINES * NPHI_ contiguous values is read
   once (coalesced) into shared memory as g+ and g-, one thread per face m - 1/2 (h+ left-biased +
   h- right-biased, periodic), faces to shared memory, then the differences are written
   (coalesced).  Same products and faces as bsp_weno_dphi. */
__global__ void bsp_weno_dphi_tile(const double* Phi, const double* a3f, const double* deps,
                                   double* out, int NS, int NW, int nline, double alpha, double eps,
                                   double inv)
{
    __shared__ double gp[LINES * NPHI_];
    __shared__ double gm[LINES * NPHI_];
    __shared__ double fc[LINES * NPHI_];
    __shared__ double dl[LINES];
    __shared__ int row[LINES];
    long long line0 = (long long)blockIdx.x * LINES;
    int nl = nline - line0 < LINES ? (int)(nline - line0) : LINES;
    int n = nl * NPHI_;
    for (int j = threadIdx.x; j < nl; j += blockDim.x) {
        long long line = line0 + j;
        int l = (int)(line % NW);
        long long ipv = line / NW;
        int nu = (int)((ipv / NS) % 3);
        dl[j] = deps[ipv];
        row[j] = (nu * NW + l) * NPHI_;
    }
    __syncthreads();
    const double* P = Phi + line0 * NPHI_;
    for (int k = threadIdx.x; k < n; k += blockDim.x) {
        int j = k / NPHI_;
        int m = k - j * NPHI_;
        double a = a3f[row[j] + m] * dl[j];
        double x = P[k];
        gp[k] = ((a + alpha) * x) * 0.5;
        gm[k] = ((a - alpha) * x) * 0.5;
    }
    __syncthreads();
    for (int k = threadIdx.x; k < n; k += blockDim.x) {
        int j = k / NPHI_;
        int m = k - j * NPHI_;
        const double* p = gp + j * NPHI_;
        const double* q = gm + j * NPHI_;
        int i[6];
        for (int r = 0; r < 6; ++r) {
            int mm = m - 3 + r;
            i[r] = mm < 0 ? mm + NPHI_ : (mm >= NPHI_ ? mm - NPHI_ : mm);
        }
        fc[k] = weno_face(p[i[0]], p[i[1]], p[i[2]], p[i[3]], p[i[4]], p[i[5]], 1, eps)
              + weno_face(q[i[0]], q[i[1]], q[i[2]], q[i[3]], q[i[4]], q[i[5]], 0, eps);
    }
    __syncthreads();
    double* o = out + line0 * NPHI_;
    for (int k = threadIdx.x; k < n; k += blockDim.x) {
        int j = k / NPHI_;
        int m = k - j * NPHI_;
        int next = m + 1 == NPHI_ ? j * NPHI_ : k + 1;
        o[k] = (fc[next] - fc[k]) * inv;
    }
}
#endif

#if BSP_WENO_FAST && defined(NPHI_) && defined(LROWS)
/* ------------------------------------------------------------------ w + phi + RK + DENS, fused
   block = (i, nu, p) and a chunk of LROWS energy rows l0 .. l0+nr-1 (all NPHI_ angles): Phi of
   rows l0-3 .. l0+nr+2 is read once (coalesced); shared memory holds the w fluxes g = a2 Phi of
   those rows (ghost rows below w = 0 at the partner angle, constant extension above), g+- of the
   phi split and Phi of the chunk's rows.  One thread per face: the w faces l0-1/2 .. l0+nr-1/2
   (the top face 0; at l0 = 0 the bottom face is (h(m) - h(m + NPHI/2))/2 of two faces of this
   block), then the phi faces (h+ + h-) into the g buffer; then per node the RK update of rk.cu
   (H = G - Lc Phi - (x + w + phi terms), the terms formed exactly as bsp_weno_dw and
   bsp_weno_dphi_tile form them, so the result equals the unfused path bit for bit) and
   PhiHat = dphi sum_m Phi^{s+1} in the order m = 0 .. NPHI-1 (rows padded to an odd length).
   Layout (round 7, docs/performance-bte-kernels.md §11; the same operations on the same values as
   round 3, so the same bits): g+ and g- of a node side by side (double2: one 16-byte shared load
   per stencil point for both halves) in rows of NPHI_ + 6 that repeat the 3 periodic neighbours at
   each end (no index wrap per face); the upwind side of each w column once per block (lw); 32-bit
   offsets from per-block base pointers.  Needs NPHI_ >= 3.
   Shared memory: 8 (LROWS (NPHI_|1) + (LROWS + 6) NPHI_ + 2 LROWS (NPHI_ + 6) + (LROWS + 1) NPHI_)
   + 4 NPHI_ B: at most rk.SHARED (LROWS from rk.rows_per_block), under the 48 KB of static shared
   memory.  from_scal = 1 (the replayed CUDA graph of bte_graph.py): alpha = scal[0] and dt =
   scal[1] instead of the arguments. */
#define ROWP (NPHI_ | 1)
#define ROWG (NPHI_ + 6)
#if BSP_WENO_FAST2 && defined(WPHI_BLOCK)
#define NT WPHI_BLOCK  /* the launcher's block size (rk.BLOCK) as a constant: the loops' stride in no register */
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define NOUNROLL _Pragma("unroll 1")  /* no unrolled copies of the loops (registers, spills) */
#endif
#endif
#ifndef NT
#define NT blockDim.x
#endif
#ifndef NOUNROLL
#define NOUNROLL
#endif
__global__ void __launch_bounds__(256, 6)
bsp_wphi_rk(const double* Phi, const double* Phi0, const double* G, const double* Lc,
            const double* tx, const double* a1, const double* a3f, const double* deps,
            double* out, double* PhiHat, int NS, int NW, int nchunk, int scat,
            int has0, double alpha, double eps, double inv_w, double inv_phi,
            double dt, double c, double c0, double dphi, const double* scal,
            int from_scal)
{
    if (from_scal) {  /* numerics.bte_graph: alpha and dt of this stage from device memory */
        alpha = scal[0];
        dt = scal[1];
    }
    __shared__ double ph[LROWS * ROWP];         /* Phi of rows l0 .. l0+nr-1, then Phi^{s+1} */
    __shared__ double gw[(LROWS + 6) * NPHI_];  /* a2 Phi of rows l0-3 .. l0+nr+2, then the phi faces */
    __shared__ double2 gpm[LROWS * ROWG];       /* phi split ((a3 + alpha) Phi / 2, (a3 - alpha) Phi / 2);
                                                   position k of a row = angle k - 3 (periodic) */
    __shared__ double fw[(LROWS + 1) * NPHI_];  /* w faces l0-1/2 .. l0+nr-1/2 */
    __shared__ int lw[NPHI_];                   /* w column m left-biased (a2 > 0) */
    int b = (int)blockIdx.x;
    int ipv = b / nchunk;
    int l0 = (b - ipv * nchunk) * LROWS;
    int nr = NW - l0 < LROWS ? NW - l0 : LROWS;
    int nu = (ipv / NS) % 3;
    double d = deps[ipv];
    double md = -d;
    const double* Pl = Phi + (long long)ipv * NW * NPHI_;
    const double* a1n = a1 + (long long)nu * NW * NPHI_;
    const double* a3n = a3f + ((long long)nu * NW + l0) * NPHI_;
#if BSP_WENO_FAST2
    /* the faces are formed times 12 (weno2_face12, weno2_phi_pair12); lw[m] = the stride of column m's
       stencil in gw: +NPHI_ left-biased, -NPHI_ right-biased (read from its top row down) */
    inv_w *= 1.0 / 12.0;
    inv_phi *= 1.0 / 12.0;
    for (int m = threadIdx.x; m < NPHI_; m += NT) lw[m] = (a1n[m] * md) > 0.0 ? NPHI_ : -NPHI_;
#else
    for (int m = threadIdx.x; m < NPHI_; m += NT) lw[m] = (a1n[m] * md) > 0.0;
#endif
    int ng = (nr + 6) * NPHI_;
    int o0 = (l0 - 3) * NPHI_;  /* plane offset of row l0 - 3 */
    int top = NW * NPHI_;
    int nn = nr * NPHI_;
    const double* Po = Pl + o0;              /* Po[t], a1o[t]: node t of rows l0-3 .. (in the plane) */
    const double* a1o = a1n + o0;
    const double* a3o = a3n - 3 * NPHI_;     /* a3o[t]: the chunk's rows */
    NOUNROLL for (int t = threadIdx.x; t < ng; t += NT) {
        int o = o0 + t;
        double g;
        if (o < 0) {  /* ghost row -k-1 <- row j = -k-1 at the partner angle (l0 = 0 only) */
            int r = t / NPHI_;
            int m = t - r * NPHI_;
            int j = 2 - r;
            g = (a1n[j * NPHI_ + m] * md) * Pl[j * NPHI_ + (m + NPHI_ / 2) % NPHI_];
        } else if (o >= top) {  /* above NW - 1: the last row */
            int kk = top - NPHI_ + t % NPHI_;
            g = (a1n[kk] * md) * Pl[kk];
        } else {
            double x = Po[t];
            g = (a1o[t] * md) * x;
            int u = t - 3 * NPHI_;  /* j NPHI_ + m of the chunk's rows */
            if (u >= 0 && u < nn) {
                int j = u / NPHI_;
                int m = u - j * NPHI_;
                double a = a3o[t] * d;
                ph[j * ROWP + m] = x;
                double2 v;
                v.x = ((a + alpha) * x) * 0.5;
                v.y = ((a - alpha) * x) * 0.5;
                int e = j * ROWG + m + 3;
                gpm[e] = v;
                if (m < 3) gpm[e + NPHI_] = v;
                if (m >= NPHI_ - 3) gpm[e - NPHI_] = v;
            }
        }
        gw[t] = g;
    }
    __syncthreads();
    int nf = nn + NPHI_;
    NOUNROLL for (int t = threadIdx.x; t < nf; t += NT) {
        int f = t / NPHI_;
        int m = t - f * NPHI_;
        const double* g = gw + t;  /* rows f .. f+5 of column m: g_{l-3} .. g_{l+2}, l = l0 + f */
#if BSP_WENO_FAST2
        /* left-biased: g_{l-3} .. g_{l+1}; right-biased: the reversed stencil g_{l+2} .. g_{l-2} */
        int st = lw[m];  /* +-NPHI_ */
        const double* gs = st > 0 ? g : g + 5 * NPHI_;
        double h = weno2_face12(gs[0], gs[st], gs[2 * st], gs[3 * st], gs[4 * st], eps);
#else
        double h = weno_face(g[0], g[NPHI_], g[2 * NPHI_], g[3 * NPHI_], g[4 * NPHI_], g[5 * NPHI_], lw[m], eps);
#endif
        fw[t] = l0 + f == NW ? 0.0 : h;
    }
    __syncthreads();
    NOUNROLL for (int t = threadIdx.x; t < nn; t += NT) {
        int j = t / NPHI_;
        int m = t - j * NPHI_;
        const double2* r = gpm + j * ROWG + m;  /* angles m-3 .. m+2 */
        double2 v0 = r[0], v1 = r[1], v2 = r[2], v3 = r[3], v4 = r[4], v5 = r[5];
#if BSP_WENO_FAST2
        gw[t] = weno2_phi_pair12(v0, v1, v2, v3, v4, v5, eps);
#else
        gw[t] = weno_face(v0.x, v1.x, v2.x, v3.x, v4.x, v5.x, 1, eps)
              + weno_face(v0.y, v1.y, v2.y, v3.y, v4.y, v5.y, 0, eps);
#endif
    }
    __syncthreads();
    const double* fc = gw;
    long long hat0 = (long long)ipv * NW + l0;
    long long q0 = hat0 * NPHI_;
    const double* txb = tx + q0;
    const double* P0b = Phi0 + q0;
    double* ob = out + q0;
    NOUNROLL for (int t = threadIdx.x; t < nn; t += NT) {
        int j = t / NPHI_;
        int m = t - j * NPHI_;
        double fp = fw[t];
        if (l0 + j == 0) fp = 0.5 * (fp - fw[(m + NPHI_ / 2) % NPHI_]);
        double tw = (fw[t + NPHI_] - fp) * inv_w;
        int next = m + 1 == NPHI_ ? t + 1 - NPHI_ : t + 1;
        double tp = (fc[next] - fc[t]) * inv_phi;
        double x = ph[j * ROWP + m];
        double h = -((txb[t] + tw) + tp);
        if (scat) h = fma(-Lc[hat0 + j], x, h + G[hat0 + j]);
        double v = fma(dt, h, x);
        if (has0) v = fma(c0, P0b[t], c * v);
        ob[t] = v;
        ph[j * ROWP + m] = v;
    }
    __syncthreads();
    NOUNROLL for (int j = threadIdx.x; j < nr; j += NT) {
        const double* r = ph + j * ROWP;
        double acc = 0.0;
        for (int m = 0; m < NPHI_; ++m) acc += r[m];
        PhiHat[hat0 + j] = acc * dphi;
    }
}
#undef ROWG
#undef ROWP
#undef NT
#undef NOUNROLL
#endif

}  /* extern "C" */
