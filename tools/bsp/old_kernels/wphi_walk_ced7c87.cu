/* bsp_wphi_walk of branch s19-wphi-walk (ced7c87): the rolling-window fused kernel of docs/performance-bte-kernels.md §17, measured slower than bsp_wphi_rk on the H200 (§17.4) and not merged; its text kept for reference.  Not built by the package. */
/* numerics.wphi_kernel: walk -- the rolling-window fused kernel of the RK stage (phase RK_wphi; issue #13,
   docs/performance-bte-kernels.md §7.4 and §17), launched by wphi_walk.py in place of bsp_wphi_rk of weno.cu.

   bsp_wphi_rk (the tile kernel) gives each block a chunk of LROWS energy rows of one (i, nu, p) plane and
   loads LROWS + 6 rows (3 halo rows each side) and forms LROWS + 1 w faces per column: 22/16 loads at
   NPHI = 48, 13/7 at NPHI = 96.  bsp_wphi_walk gives each block a long segment l0 .. l1-1 of the energy rows
   of one plane (the whole plane, or a few segments of it where more blocks fill the GPU better) and walks UP
   it WROWS rows per iteration, keeping rolling windows (ring buffers) in shared memory: each row of Phi is
   loaded once (plus 6 halo rows and one extra w face per segment) and each w face is formed once.

   It computes the same bits as bsp_wphi_rk built for numerics.bte_kernels fast2 (-DBSP_WENO_FAST=1
   -DBSP_WENO_FAST2=1): the same expressions on the same values in the same order -- g = (a1 md) Phi of each
   row (ghost rows below w = 0 at the partner angle (m + NPHI/2) % NPHI, rows above NW-1 = the last row), the
   w face of column m by weno2_face12 on the 5 stencil values in the tile kernel's order (lw[m] = +-NPHI: the
   right-biased stencil read from its top row down), the bottom face 0.5 (fp - fw[partner]) at l = 0, the top
   face 0 at l = NW, the phi split v = ((a3 d +- alpha) Phi) 0.5 in double2 rows padded by 3 periodic angles
   each side, the phi pair by weno2_phi_pair12 on the same 6 double2, the RK update
   h = -((tx + tw) + tp); scat: h = fma(-Lc, x, h + G); v = fma(dt, h, x); has0: v = fma(c0, P0, c v),
   PhiHat = (sum over m = 0 .. NPHI-1 in that order) dphi.

   Pipeline (u = the first row of the current chunk U of WROWS rows, u = l0, l0 + WROWS, ..):
     prologue  load rows l0-3 .. l0+2 | the w face l0 and the phi faces of rows l0 .. l0+2 |
     iteration A: load rows u+3 .. u+WROWS+2 (g, Phi, phi split) and the RK update of the previous chunk
                  (rows u-WROWS .. u-1: their faces are ready)                                     |
               B: the w faces u+1 .. u+WROWS, the phi faces of the rows just loaded, PhiHat of the
                  previous chunk                                                                    |
   (| = a block barrier), until the chunk starts at l1 (its A is the last update).  Ring buffers (row r at
   slot (r - base) mod size): g rows (RG = WROWS + 5, the 5 first slots repeated after the last, so that the
   6 stencil rows of a face are contiguous), Phi then Phi^{s+1} (RP = 2 WROWS + 3), phi faces (RF = WROWS + 3),
   w faces (RW = WROWS + 1, slot 0 repeated after the last); the phi split of the rows just loaded in a
   plain buffer of max(WROWS, 3) padded rows.

   Built by wphi_walk.py with --fmad=false -DNPHI_=<NPHI> -DWROWS=<rows per iteration> -DWALK_BLOCK=<threads>
   -DWALK_MINB=<blocks per SM for __launch_bounds__>.  The device functions below are copies of weno.cu's
   fast2 ones (weno2_parts, weno2_face12, weno2_phi_pair12 and the __drcp_rn host shim, weno.cu lines of
   "#if BSP_WENO_FAST2"); keep them equal (the tests assert walk == tile bit for bit, host and device).
   fast's bsp_wk constants are not needed by them. */
extern "C" {

#if !defined(__CUDACC__) && !defined(__CUDACC_RTC__)
/* the host build of the tests: the correctly rounded reciprocal of the device intrinsic (copy of weno.cu's) */
static inline double __drcp_rn(double x) { return 1.0 / x; }
#endif

/* copy of weno.cu weno2_parts: numerator and denominator of 12 F(a, b, c, d) = num / s */
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

/* copy of weno.cu weno2_face12: 12 x the left-biased face h_{j-1/2} from g_{j-3} .. g_{j+1} */
__device__ __forceinline__ double weno2_face12(double g0, double g1, double g2, double g3, double g4,
                                               double eps)
{
    double Dm2 = g1 - g0, Dm1 = g2 - g1, D0 = g3 - g2, Dp1 = g4 - g3;
    double num, s;
    weno2_parts(Dm2, Dm1, D0, Dp1, eps, num, s);
    return fma(12.0, g2, fma(6.0, D0, Dm1 - Dp1)) + num * __drcp_rn(s);
}

/* copy of weno.cu weno2_phi_pair12: 12 x the phi face m-1/2 of the Lax-Friedrichs pair from angles m-3 .. m+2 */
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

#if defined(NPHI_) && defined(WROWS) && defined(WALK_BLOCK)
#if WROWS < 3 || WROWS * NPHI_ > WALK_BLOCK
#error "bsp_wphi_walk: WROWS >= 3 rows per iteration and a thread per node of them (WALK_BLOCK >= WROWS NPHI_)"
#endif
#define R_ WROWS
#define ROWP (NPHI_ | 1)                      /* a Phi row (odd length: no bank conflicts of the row sums) */
#define ROWG (NPHI_ + 6)                      /* a padded phi-split row: position k = angle k - 3 (periodic) */
#define NG (3 * R_)                           /* g ring: 3 chunks (+3 repeated rows each side) */
#define NP (3 * R_)                           /* Phi ring: 3 chunks */
#define NF (2 * R_)                           /* phi face ring: 2 chunks */
#define NW_ (2 * R_)                          /* w face ring: 2 chunks (+1 repeated row in front) */
#define NT WALK_BLOCK
#ifndef WALK_MINB
#define WALK_MINB 1
#endif
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define NOUNROLL _Pragma("unroll 1")
#else
#define NOUNROLL
#endif

/* Chunk k = rows u_k .. u_k + R_ - 1, u_k = l0 + k R_.  Row r of the segment (and the 3 rows below it) has slot
   (r - l0) mod N in a ring of N = a multiple of R_ rows, so a chunk's rows have consecutive slots b .. b + R_ - 1
   (b = (k R_) mod N): a thread's row j of a chunk is at slot b + j with no wrap, and (j, m) is the same for a
   thread in every phase (one thread per node of a chunk).  Iteration k:
     A_k: load chunk k+1 (g, Phi, phi split) and update chunk k-1 (its w faces u_{k-1} .. u_k, phi faces ready)
     B_k: w faces u_k + 1 .. u_k + R_ (g rows u_k - 2 .. u_k + R_ + 2: loaded, R_ >= 3), phi faces of chunk k+1,
          PhiHat of chunk k-1.
   g ring (3 chunks: rows u_k - 2 .. u_k + 2 R_ - 1 are needed at B_k): position = slot + 3, the last 3 slots also
   at positions 0 .. 2 and the first 3 at 3 R_ + 3 .. 3 R_ + 5, so that the 6 rows l-3 .. l+2 of a face's column
   are consecutive.  w faces: face l at slot (l - l0 - 1) mod 2 R_, position slot + 1, the last slot also at 0. */
__global__ void __launch_bounds__(WALK_BLOCK, WALK_MINB)
bsp_wphi_walk(const double* Phi, const double* Phi0, const double* G, const double* Lc,
              const double* tx, const double* a1, const double* a3f, const double* deps,
              double* out, double* PhiHat, int NS, int NW, int nseg, int seg, int scat,
              int has0, double alpha, double eps, double inv_w, double inv_phi,
              double dt, double c, double c0, double dphi, const double* scal,
              int from_scal)
{
    if (from_scal) {  /* numerics.bte_graph: alpha and dt of this stage from device memory */
        alpha = scal[0];
        dt = scal[1];
    }
    __shared__ double gw[(NG + 6) * NPHI_];   /* g = a2 Phi */
    __shared__ double ph[NP * ROWP];          /* Phi, then Phi^{s+1} */
    __shared__ double2 gpm[R_ * ROWG];        /* phi split of the chunk being loaded */
    __shared__ double fc[NF * NPHI_];         /* 12 x phi faces */
    __shared__ double fw[(NW_ + 1) * NPHI_];  /* 12 x w faces */
    __shared__ int lw[NPHI_];                 /* the stride of column m's w stencil: +-NPHI_ */
    int b = (int)blockIdx.x;
    int ipv = b / nseg;
    int l0 = (b - ipv * nseg) * seg;
    int l1 = NW - l0 < seg ? NW : l0 + seg;
    int nu = (ipv / NS) % 3;
    double d = deps[ipv];
    double md = -d;
    const double* Pl = Phi + (long long)ipv * NW * NPHI_;
    const double* a1n = a1 + (long long)nu * NW * NPHI_;
    const double* a3n = a3f + (long long)nu * NW * NPHI_;
    long long hat0 = (long long)ipv * NW;
    inv_w *= 1.0 / 12.0;  /* the faces are formed times 12 (as bsp_wphi_rk fast2) */
    inv_phi *= 1.0 / 12.0;
    for (int m = threadIdx.x; m < NPHI_; m += NT) lw[m] = (a1n[m] * md) > 0.0 ? NPHI_ : -NPHI_;
    const int top = NW * NPHI_;
    const int half = NPHI_ / 2;
    const int t0 = threadIdx.x, j0 = t0 / NPHI_, m0 = t0 - j0 * NPHI_;

    /* one row node of a load: g (ghost / top rules) at g slot sg, and for the segment's own rows Phi at Phi slot
       sp and the phi split in gpm row jb */
#define WALK_LOAD(r, m, sg, sp, jb)                                                                       \
    {                                                                                                     \
        double g_;                                                                                        \
        if ((r) < 0) {                                                                                    \
            int j_ = -(r) - 1;                                                                            \
            g_ = (a1n[j_ * NPHI_ + (m)] * md) * Pl[j_ * NPHI_ + ((m) + half) % NPHI_];                    \
        } else if ((r) >= NW) {                                                                           \
            int kk_ = top - NPHI_ + (m);                                                                  \
            g_ = (a1n[kk_] * md) * Pl[kk_];                                                               \
        } else {                                                                                          \
            int o_ = (r) * NPHI_ + (m);                                                                   \
            double x_ = Pl[o_];                                                                           \
            g_ = (a1n[o_] * md) * x_;                                                                     \
            if ((r) >= l0 && (r) < l1) {                                                                  \
                double a_ = a3n[o_] * d;                                                                  \
                ph[(sp) * ROWP + (m)] = x_;                                                               \
                double2 v_;                                                                               \
                v_.x = ((a_ + alpha) * x_) * 0.5;                                                         \
                v_.y = ((a_ - alpha) * x_) * 0.5;                                                         \
                int e_ = (jb) * ROWG + (m) + 3;                                                           \
                gpm[e_] = v_;                                                                             \
                if ((m) < 3) gpm[e_ + NPHI_] = v_;                                                        \
                if ((m) >= NPHI_ - 3) gpm[e_ - NPHI_] = v_;                                               \
            }                                                                                             \
        }                                                                                                 \
        double* q_ = gw + ((sg) + 3) * NPHI_ + (m);                                                       \
        q_[0] = g_;                                                                                       \
        if ((sg) >= NG - 3) q_[-NG * NPHI_] = g_;                                                         \
        if ((sg) < 3) q_[NG * NPHI_] = g_;                                                                \
    }
    /* the w face l - 1/2 of column m (its g rows l-3 .. l+2 from position pg on) into w slot sw */
#define WALK_WFACE(l, m, pg, sw)                                                                          \
    {                                                                                                     \
        double h_ = 0.0;                                                                                  \
        if ((l) != NW) {                                                                                  \
            const double* g_ = gw + (pg) * NPHI_ + (m);                                                   \
            int st_ = lw[m];                                                                              \
            const double* gs_ = st_ > 0 ? g_ : g_ + 5 * NPHI_;                                            \
            h_ = weno2_face12(gs_[0], gs_[st_], gs_[2 * st_], gs_[3 * st_], gs_[4 * st_], eps);           \
        }                                                                                                 \
        double* q_ = fw + ((sw) + 1) * NPHI_ + (m);                                                       \
        q_[0] = h_;                                                                                       \
        if ((sw) == NW_ - 1) q_[-NW_ * NPHI_] = h_;                                                       \
    }
    /* the phi face pair of gpm row jb, angle m into phi slot sf */
#define WALK_PFACE(jb, m, sf)                                                                             \
    {                                                                                                     \
        const double2* r_ = gpm + (jb) * ROWG + (m);                                                      \
        double2 v0_ = r_[0], v1_ = r_[1], v2_ = r_[2], v3_ = r_[3], v4_ = r_[4], v5_ = r_[5];             \
        fc[(sf) * NPHI_ + (m)] = weno2_phi_pair12(v0_, v1_, v2_, v3_, v4_, v5_, eps);                     \
    }

    /* prologue: rows l0-3 .. l0-1 (g slots NG-3 .. NG-1) and chunk 0 (slots 0 .. R_-1, gpm rows 0 .. R_-1), as far
       as they are needed (g up to l1 + 2, Phi below l1) */
    {
        int n = l1 + 3 - (l0 - 3);
        n = (n < R_ + 3 ? n : R_ + 3) * NPHI_;
        NOUNROLL for (int t = t0; t < n; t += NT) {
            int q = t / NPHI_;
            int m = t - q * NPHI_;
            int j = q - 3;
            WALK_LOAD(l0 + j, m, j < 0 ? j + NG : j, j, j)
        }
    }
    __syncthreads();
    {   /* w face l0 (slot NW_ - 1), phi faces of chunk 0 (slots 0 .. R_-1) */
        int np = l1 - l0;
        np = (np < R_ ? np : R_) * NPHI_;
        NOUNROLL for (int t = t0; t < NPHI_ + np; t += NT) {
            int q = t / NPHI_;
            int m = t - q * NPHI_;
            if (q == 0) {
                WALK_WFACE(l0, m, 0, NW_ - 1)
            } else {
                WALK_PFACE(q - 1, m, q - 1)
            }
        }
    }
    __syncthreads();

    const double* txp = tx + hat0 * NPHI_ + t0;   /* + row offset of the chunk x NPHI_ */
    const double* P0p = Phi0 + hat0 * NPHI_ + t0;
    double* op = out + hat0 * NPHI_ + t0;
    int k3 = 0, k2 = 0;  /* k mod 3, k mod 2 */
    for (int u = l0;; u += R_) {
        int b1 = k3 == 2 ? 0 : (k3 + 1) * R_;  /* ((k+1) mod 3) R_: g and Phi slots of chunk k+1 */
        int bm = k3 == 0 ? 2 * R_ : (k3 - 1) * R_;  /* ((k-1) mod 3) R_: Phi slots of chunk k-1 */
        int bf = k2 ? 0 : R_;  /* ((k+1) mod 2) R_ = ((k-1) mod 2) R_: phi faces of chunks k+1 and k-1, w faces of
                                  chunk k-1 (faces u_{k-1}+1 ..) */
        int bw = k2 * R_;  /* (k mod 2) R_: w faces of chunk k (faces u_k + 1 ..) */
        int up = u - R_;
        /* ---- A: load chunk k+1 (rows u + R_ .. , g up to l1 + 2), update chunk k-1 (rows below l1) */
        if (t0 < (l1 + 3 - (u + R_)) * NPHI_ && j0 < R_) {  /* (j0 < R_: more threads than nodes) */
            int sg = b1 + j0;
            WALK_LOAD(u + R_ + j0, m0, sg, sg, j0)
        }
        if (up >= l0 && t0 < (l1 - up) * NPHI_ && j0 < R_) {
            int l = up + j0;
            const double* f = fw + (bf + j0) * NPHI_;  /* face l at position slot + 1 = bf - 1 + j0 + 1 */
            double fp = f[m0];
            if (l == 0) fp = 0.5 * (fp - f[(m0 + half) % NPHI_]);
            double tw = (f[m0 + NPHI_] - fp) * inv_w;
            const double* fr = fc + (bf + j0) * NPHI_;
            int next = m0 + 1 == NPHI_ ? 0 : m0 + 1;
            double tp = (fr[next] - fr[m0]) * inv_phi;
            double* pr = ph + (bm + j0) * ROWP + m0;
            double x = *pr;
            int q = up * NPHI_;
            double h = -((txp[q] + tw) + tp);
            if (scat) h = fma(-Lc[hat0 + l], x, h + G[hat0 + l]);
            double v = fma(dt, h, x);
            if (has0) v = fma(c0, P0p[q], c * v);
            op[q] = v;
            *pr = v;
        }
        __syncthreads();
        /* ---- B: w faces u+1 .. min(u + R_, l1) (g window of face u+1+j from position (k mod 3) R_ + 1 + j),
           phi faces of chunk k+1 (rows below l1), PhiHat of chunk k-1 */
        if (j0 < R_) {
            if (t0 < (l1 - u) * NPHI_) {
                int bg = k3 * R_ + 1 + j0;
                WALK_WFACE(u + 1 + j0, m0, bg, bw + j0)
            }
            if (t0 < (l1 - u - R_) * NPHI_) WALK_PFACE(j0, m0, bf + j0)
        }
        if (up >= l0 && t0 < l1 - up && t0 < R_) {
            const double* r = ph + (bm + t0) * ROWP;
            double acc = 0.0;
            for (int m = 0; m < NPHI_; ++m) acc += r[m];
            PhiHat[hat0 + up + t0] = acc * dphi;
        }
        if (u >= l1) break;
        __syncthreads();
        k3 = k3 == 2 ? 0 : k3 + 1;
        k2 ^= 1;
    }
#undef WALK_LOAD
#undef WALK_WFACE
#undef WALK_PFACE
}
#undef R_
#undef ROWP
#undef ROWG
#undef NG
#undef NP
#undef NF
#undef NW_
#undef NT
#undef NOUNROLL
#endif

}  /* extern "C" */
