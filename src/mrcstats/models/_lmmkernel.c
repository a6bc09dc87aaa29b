/* The one-term LMM kernel of mrcstats.models.lmm_fit: one pass over the levels of the only random-effects term.
 *
 * For one term (q columns, n1 levels) the matrix M = ΛᵀZᵀZΛ + I of lme4's penalised least squares is
 * block-diagonal, D_j = TᵀA_jT + I per level j (A_j = Z_jᵀZ_j, T the term's lower-triangular factor), and
 * everything the profiled deviance and its exact gradient need is a sum over the levels (Bates et al. 2015,
 * J. Stat. Softw. 67(1), sec. 3; the sums are those of LmmSystem._evaluate/_grad_parts):
 *
 *   log|L|² = Σ_j log det D_j
 *   W_j     = D_j⁻¹ Tᵀ B_j                       (B_j = Z_jᵀ[y X], q x m, m = 1 + p)
 *   K       = Σ_j B_jᵀ T W_j                     (m x m: (ΛᵀZᵀ[y X])ᵀ M⁻¹ ΛᵀZᵀ[y X])
 *   Q       = Σ_j D_j⁻¹ Tᵀ A_j                   (q x q: ∂log|L|² = 2 Q[j, i] for θ's entry (i, j))
 *   G       = Σ_j (B_j − A_j T W_j) ⊗ W_j        (q x q x m x m: G[a, b, k, l] = Σ_j ZA_j[a, k] W_j[b, l])
 *
 * The caller forms β, r², RXᵀRX from K and the gradient's ∂r² and ∂log|RX|² as contractions of G with
 * [1, −β] and (RXᵀRX)⁻¹ (they are bilinear in the per-level W_j and ZA_j), so one pass suffices.
 *
 * Arrays are float64, C-contiguous and component-major (levels last), as LmmSystem stores them: A[(a q + b) n1 + j],
 * B[(a m + k) n1 + j]. Three ways through the levels, the same sums: q <= 2 and m <= 6 four levels per step in
 * vector registers (vpass: the common case, ~12 ns a level); q <= 2 with more fixed effects, lanes of a chunk as
 * arrays (lane_pass); q = 3..8 level by level (level_pass: sums per block of BLOCK levels, the blocks' sums added,
 * so the rounding error grows with BLOCK + n1 / BLOCK rather than n1). log det D_j >= 0 (D_j ⪰ I) is summed as
 * logs of running products. The second entry, one_term_modes, gives the random effects at θ̂.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK 2048
#define MAXQ 8

#if defined(__GNUC__) || defined(__clang__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#elif defined(_MSC_VER)
#define ALWAYS_INLINE __forceinline
#define restrict __restrict
#else
#define ALWAYS_INLINE inline
#endif

static ALWAYS_INLINE int
level_pass(const int q, const int m, const Py_ssize_t n1, const double *T, const double *A, const double *B,
           double *K, double *Q, double *G, double *ldL2)
{
    const int mm = m * m, qq = q * q, gg = q * q * m * m;
    double *bK = calloc((size_t)mm, sizeof(double));
    double *bQ = calloc((size_t)qq, sizeof(double));
    double *bG = calloc((size_t)gg, sizeof(double));
    double *TB = malloc(sizeof(double) * (size_t)(q * m));
    double *W = malloc(sizeof(double) * (size_t)(q * m));
    double *Y = malloc(sizeof(double) * (size_t)(q * m));
    double *ZA = malloc(sizeof(double) * (size_t)(q * m));
    if (!bK || !bQ || !bG || !TB || !W || !Y || !ZA) {
        free(bK); free(bQ); free(bG); free(TB); free(W); free(Y); free(ZA);
        return -1;
    }
    double Aj[MAXQ * MAXQ], TA[MAXQ * MAXQ], D[MAXQ * MAXQ], L[MAXQ * MAXQ], Di[MAXQ * MAXQ];
    double logsum = 0.0, prod = 1.0;
    int bad = 0;
    memset(K, 0, sizeof(double) * (size_t)mm);
    memset(Q, 0, sizeof(double) * (size_t)qq);
    memset(G, 0, sizeof(double) * (size_t)gg);
    for (Py_ssize_t j = 0; j < n1; j++) {
        for (int a = 0; a < qq; a++) Aj[a] = A[a * n1 + j];
        /* TA = Tᵀ A_j, D = TA T + I */
        for (int a = 0; a < q; a++)
            for (int b = 0; b < q; b++) {
                double s = 0.0;
                for (int c = a; c < q; c++) s += T[c * q + a] * Aj[c * q + b];     /* T lower: T[c, a] = 0 for c < a */
                TA[a * q + b] = s;
            }
        for (int a = 0; a < q; a++)
            for (int b = 0; b <= a; b++) {
                double s = (a == b) ? 1.0 : 0.0;
                for (int c = b; c < q; c++) s += TA[a * q + c] * T[c * q + b];
                D[a * q + b] = s;
                D[b * q + a] = s;
            }
        /* Cholesky D = L Lᵀ and det D = Π L_aa² */
        double det = 1.0;
        for (int a = 0; a < q; a++) {
            for (int b = 0; b <= a; b++) {
                double s = D[a * q + b];
                for (int c = 0; c < b; c++) s -= L[a * q + c] * L[b * q + c];
                if (a == b) {
                    if (!(s > 0.0)) { bad = 1; s = 1.0; }
                    L[a * q + a] = sqrt(s);
                    det *= s;
                } else {
                    L[a * q + b] = s / L[b * q + b];
                }
            }
        }
        if (det > 1e100) {
            logsum += log(det);
        } else {
            prod *= det;
            if (prod > 1e200) { logsum += log(prod); prod = 1.0; }
        }
        /* D⁻¹ = L⁻ᵀ L⁻¹: columns of L⁻¹ by forward substitution, then Di = L⁻ᵀ (L⁻¹) */
        {
            double Li[MAXQ * MAXQ];
            for (int c = 0; c < q; c++)
                for (int a = 0; a < q; a++) {
                    double s = (a == c) ? 1.0 : 0.0;
                    for (int b = c; b < a; b++) s -= L[a * q + b] * Li[b * q + c];
                    Li[a * q + c] = (a < c) ? 0.0 : s / L[a * q + a];
                }
            for (int a = 0; a < q; a++)
                for (int b = 0; b <= a; b++) {
                    double s = 0.0;
                    for (int c = a; c < q; c++) s += Li[c * q + a] * Li[c * q + b];
                    Di[a * q + b] = s;
                    Di[b * q + a] = s;
                }
        }
        /* TB = Tᵀ B_j, W = D⁻¹ TB, Y = T W */
        for (int a = 0; a < q; a++)
            for (int k = 0; k < m; k++) {
                double s = 0.0;
                for (int c = a; c < q; c++) s += T[c * q + a] * B[(c * m + k) * n1 + j];
                TB[a * m + k] = s;
            }
        for (int a = 0; a < q; a++)
            for (int k = 0; k < m; k++) {
                double s = 0.0;
                for (int c = 0; c < q; c++) s += Di[a * q + c] * TB[c * m + k];
                W[a * m + k] = s;
            }
        for (int a = 0; a < q; a++)
            for (int k = 0; k < m; k++) {
                double s = 0.0;
                for (int c = 0; c <= a; c++) s += T[a * q + c] * W[c * m + k];
                Y[a * m + k] = s;
            }
        /* K += B_jᵀ Y (upper triangle), Q += D⁻¹ TA, ZA = B_j − A_j Y, G += ZA ⊗ W */
        for (int k = 0; k < m; k++)
            for (int l = k; l < m; l++) {
                double s = 0.0;
                for (int a = 0; a < q; a++) s += B[(a * m + k) * n1 + j] * Y[a * m + l];
                bK[k * m + l] += s;
            }
        for (int a = 0; a < q; a++)
            for (int b = 0; b < q; b++) {
                double s = 0.0;
                for (int c = 0; c < q; c++) s += Di[a * q + c] * TA[c * q + b];
                bQ[a * q + b] += s;
            }
        for (int a = 0; a < q; a++)
            for (int k = 0; k < m; k++) {
                double s = B[(a * m + k) * n1 + j];
                for (int c = 0; c < q; c++) s -= Aj[a * q + c] * Y[c * m + k];
                ZA[a * m + k] = s;
            }
        for (int a = 0; a < q; a++)
            for (int b = 0; b < q; b++) {
                double *g = bG + (a * q + b) * mm;
                for (int k = 0; k < m; k++) {
                    const double z = ZA[a * m + k];
                    for (int l = 0; l < m; l++) g[k * m + l] += z * W[b * m + l];
                }
            }
        if ((j + 1) % BLOCK == 0 || j + 1 == n1) {
            for (int i = 0; i < mm; i++) { K[i] += bK[i]; bK[i] = 0.0; }
            for (int i = 0; i < qq; i++) { Q[i] += bQ[i]; bQ[i] = 0.0; }
            for (int i = 0; i < gg; i++) { G[i] += bG[i]; bG[i] = 0.0; }
        }
    }
    for (int k = 0; k < m; k++)
        for (int l = 0; l < k; l++) K[k * m + l] = K[l * m + k];
    *ldL2 = logsum + log(prod);
    free(bK); free(bQ); free(bG); free(TB); free(W); free(Y); free(ZA);
    return bad;
}

/* The same sums for q <= 2, levels in chunks of `ch` processed as lanes: every step is a loop over the chunk's
 * lanes (structure of arrays, vectorised by the compiler), so the long dependency chain of one level (the block's
 * factorisation, D⁻¹, W, ZA) overlaps across levels; the sums are kept per lane and added at the end. D_j is
 * factorised as L diag(d) Lᵀ with L unit lower triangular (no square roots): det D_j = Π d_a,
 * D_j⁻¹ = L⁻ᵀ diag(1/d) L⁻¹. */
#define LANE(arr, i) ((arr) + (size_t)(i) * (size_t)ch)

/* out[a, k, lane] = Σ_{c >= a} T[c, a] X[c, k, j0 + lane] (Tᵀ X for the chunk; T lower triangular; X q x w x n1) */
static ALWAYS_INLINE void
lane_tt(const int q, const int w, const double *restrict T, const double *restrict X, const Py_ssize_t n1,
        const Py_ssize_t j0, const int len, const int ch, double *restrict out)
{
    for (int a = 0; a < q; a++)
        for (int k = 0; k < w; k++) {
            double *restrict o = LANE(out, a * w + k);
            for (int l = 0; l < len; l++) o[l] = 0.0;
            for (int c = a; c < q; c++) {
                const double t = T[c * q + a];
                const double *restrict x = X + (size_t)(c * w + k) * n1 + j0;
                for (int l = 0; l < len; l++) o[l] += t * x[l];
            }
        }
}

static ALWAYS_INLINE int
lane_pass(const int q, const int m, const Py_ssize_t n1, const double *restrict T, const double *restrict A,
          const double *restrict B, double *K, double *Q, double *G, double *ldL2)
{
    const int qq = q * q, qm = q * m, mm = m * m, gg = qq * mm;
    int ch = 4096 / gg;
    ch = ch > 64 ? 64 : (ch < 4 ? 4 : ch - ch % 4);
    const size_t per = (size_t)(4 * qq + 4 * qm + 3 + mm + qq + gg);
    double *ws = calloc(per * (size_t)ch, sizeof(double));
    if (!ws) return -1;
    double *restrict TA = ws;
    double *restrict D = TA + qq * ch;
    double *restrict Lu = D + qq * ch;          /* unit lower factor (below the diagonal) */
    double *restrict Di = Lu + qq * ch;
    double *restrict TB = Di + qq * ch;
    double *restrict W = TB + qm * ch;
    double *restrict Y = W + qm * ch;
    double *restrict ZA = Y + qm * ch;
    double *restrict dd = ZA + qm * ch;         /* d_a of the chunk: q lanes vectors (q <= 2: 2 slots) */
    double *restrict det = dd + 2 * ch;
    double *restrict aK = det + ch;
    double *restrict aQ = aK + mm * ch;
    double *restrict aG = aQ + qq * ch;
    double logsum = 0.0, prod = 1.0;
    int bad = 0;
    for (Py_ssize_t j0 = 0; j0 < n1; j0 += ch) {
        const int len = (int)((n1 - j0) < ch ? (n1 - j0) : ch);
        lane_tt(q, q, T, A, n1, j0, len, ch, TA);                   /* TA = Tᵀ A_j */
        /* D = TA T + I (lower triangle) */
        for (int a = 0; a < q; a++)
            for (int b = 0; b <= a; b++) {
                double *restrict o = LANE(D, a * q + b);
                const double one = (a == b) ? 1.0 : 0.0;
                for (int l = 0; l < len; l++) o[l] = one;
                for (int c = b; c < q; c++) {
                    const double t = T[c * q + b];
                    const double *restrict x = LANE(TA, a * q + c);
                    for (int l = 0; l < len; l++) o[l] += x[l] * t;
                }
            }
        /* D = L diag(d) Lᵀ; det = Π d_a */
        for (int l = 0; l < len; l++) det[l] = 1.0;
        for (int a = 0; a < q; a++) {
            for (int b = 0; b < a; b++) {
                double *restrict o = LANE(Lu, a * q + b);
                const double *restrict x = LANE(D, a * q + b);
                for (int l = 0; l < len; l++) o[l] = x[l];
                for (int c = 0; c < b; c++) {
                    const double *restrict u = LANE(Lu, a * q + c), *restrict v = LANE(Lu, b * q + c);
                    const double *restrict w = LANE(dd, c);
                    for (int l = 0; l < len; l++) o[l] -= u[l] * v[l] * w[l];
                }
                const double *restrict w = LANE(dd, b);
                for (int l = 0; l < len; l++) o[l] /= w[l];
            }
            double *restrict o = LANE(dd, a);
            const double *restrict x = LANE(D, a * q + a);
            for (int l = 0; l < len; l++) o[l] = x[l];
            for (int c = 0; c < a; c++) {
                const double *restrict u = LANE(Lu, a * q + c), *restrict w = LANE(dd, c);
                for (int l = 0; l < len; l++) o[l] -= u[l] * u[l] * w[l];
            }
            for (int l = 0; l < len; l++) det[l] *= o[l];
        }
        /* D⁻¹ (q <= 2): Di00 = 1/d0 + L10² / d1, Di10 = −L10 / d1, Di11 = 1/d1 */
        if (q == 1) {
            const double *restrict d0 = LANE(dd, 0);
            double *restrict o = LANE(Di, 0);
            for (int l = 0; l < len; l++) o[l] = 1.0 / d0[l];
        } else {
            const double *restrict d0 = LANE(dd, 0), *restrict d1 = LANE(dd, 1), *restrict L10 = LANE(Lu, 2);
            double *restrict o00 = LANE(Di, 0), *restrict o01 = LANE(Di, 1), *restrict o10 = LANE(Di, 2),
                   *restrict o11 = LANE(Di, 3);
            for (int l = 0; l < len; l++) {
                const double i1 = 1.0 / d1[l];
                o11[l] = i1;
                o10[l] = -L10[l] * i1;
                o01[l] = o10[l];
                o00[l] = 1.0 / d0[l] + L10[l] * L10[l] * i1;
            }
        }
        for (int l = 0; l < len; l++) {
            if (!(det[l] > 0.0)) { bad = 1; continue; }
            if (det[l] > 1e100) logsum += log(det[l]);
            else {
                prod *= det[l];
                if (prod > 1e200) { logsum += log(prod); prod = 1.0; }
            }
        }
        /* TB = Tᵀ B_j, W = D⁻¹ TB, Y = T W */
        lane_tt(q, m, T, B, n1, j0, len, ch, TB);
        for (int a = 0; a < q; a++)
            for (int k = 0; k < m; k++) {
                double *restrict o = LANE(W, a * m + k);
                for (int l = 0; l < len; l++) o[l] = 0.0;
                for (int c = 0; c < q; c++) {
                    const double *restrict x = LANE(Di, a * q + c), *restrict y = LANE(TB, c * m + k);
                    for (int l = 0; l < len; l++) o[l] += x[l] * y[l];
                }
            }
        for (int a = 0; a < q; a++)
            for (int k = 0; k < m; k++) {
                double *restrict o = LANE(Y, a * m + k);
                for (int l = 0; l < len; l++) o[l] = 0.0;
                for (int c = 0; c <= a; c++) {
                    const double t = T[a * q + c];
                    const double *restrict x = LANE(W, c * m + k);
                    for (int l = 0; l < len; l++) o[l] += t * x[l];
                }
            }
        /* K += B_jᵀ Y (upper triangle), Q += D⁻¹ TA, ZA = B_j − A_j Y, G += ZA ⊗ W */
        for (int k = 0; k < m; k++)
            for (int k2 = k; k2 < m; k2++) {
                double *restrict o = LANE(aK, k * m + k2);
                for (int a = 0; a < q; a++) {
                    const double *restrict x = B + (size_t)(a * m + k) * n1 + j0, *restrict y = LANE(Y, a * m + k2);
                    for (int l = 0; l < len; l++) o[l] += x[l] * y[l];
                }
            }
        for (int a = 0; a < q; a++)
            for (int b = 0; b < q; b++) {
                double *restrict o = LANE(aQ, a * q + b);
                for (int c = 0; c < q; c++) {
                    const double *restrict x = LANE(Di, a * q + c), *restrict y = LANE(TA, c * q + b);
                    for (int l = 0; l < len; l++) o[l] += x[l] * y[l];
                }
            }
        for (int a = 0; a < q; a++)
            for (int k = 0; k < m; k++) {
                double *restrict o = LANE(ZA, a * m + k);
                const double *restrict x = B + (size_t)(a * m + k) * n1 + j0;
                for (int l = 0; l < len; l++) o[l] = x[l];
                for (int c = 0; c < q; c++) {
                    const double *restrict u = A + (size_t)(a * q + c) * n1 + j0, *restrict y = LANE(Y, c * m + k);
                    for (int l = 0; l < len; l++) o[l] -= u[l] * y[l];
                }
            }
        for (int a = 0; a < q; a++)
            for (int b = 0; b < q; b++)
                for (int k = 0; k < m; k++)
                    for (int k2 = 0; k2 < m; k2++) {
                        double *restrict o = LANE(aG, ((a * q + b) * m + k) * m + k2);
                        const double *restrict x = LANE(ZA, a * m + k), *restrict y = LANE(W, b * m + k2);
                        for (int l = 0; l < len; l++) o[l] += x[l] * y[l];
                    }
    }
    for (int i = 0; i < mm; i++) K[i] = 0.0;
    for (int k = 0; k < m; k++)
        for (int k2 = k; k2 < m; k2++) {
            const double *restrict x = LANE(aK, k * m + k2);
            double s = 0.0;
            for (int l = 0; l < ch; l++) s += x[l];
            K[k * m + k2] = K[k2 * m + k] = s;
        }
    for (int i = 0; i < qq; i++) {
        const double *restrict x = LANE(aQ, i);
        double s = 0.0;
        for (int l = 0; l < ch; l++) s += x[l];
        Q[i] = s;
    }
    for (int i = 0; i < gg; i++) {
        const double *restrict x = LANE(aG, i);
        double s = 0.0;
        for (int l = 0; l < ch; l++) s += x[l];
        G[i] = s;
    }
    *ldL2 = logsum + log(prod);
    free(ws);
    return bad;
}

/* The same sums for q <= 2 and m <= 6, four levels at a time in vector registers (GCC/Clang vector extensions;
 * with AVX2 one instruction each, otherwise pairs of SSE2 ones): every per-level quantity stays in registers and
 * only the sums (K, Q, G: per lane, added at the end) are kept across levels. The tail (n1 mod 4 levels) is run
 * once more with zero-padded lanes, which add nothing (A = 0, B = 0: D = I, W = 0). D_j⁻¹ in closed form from
 * D = L diag(d) Lᵀ (L unit lower): d0 = D00, L10 = D10/d0, d1 = D11 − L10 D10, det D = d0 d1. */
#if defined(__GNUC__) || defined(__clang__)
#define HAVE_VEC 1
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"      /* 32-byte vectors between inlined static functions only */
#endif
typedef double v4 __attribute__((vector_size(32)));
#define VMAXM 6

static ALWAYS_INLINE v4 vload(const double *p) { v4 r; memcpy(&r, p, sizeof r); return r; }
static ALWAYS_INLINE v4 vset(double x) { v4 r = {x, x, x, x}; return r; }

/* the last n1 − j (< 4) levels of A (q x q x n1) and B (q x m x n1) as four zero-padded lanes (stride 4) in ta, tb:
 * the padded lanes add nothing (A = 0, B = 0: D = I, W = 0) */
static ALWAYS_INLINE void
vpad_tail(const int q, const int m, const Py_ssize_t n1, const Py_ssize_t j, const double *A, const double *B,
          double *ta, double *tb)
{
    memset(ta, 0, sizeof(double) * 4 * 4);
    memset(tb, 0, sizeof(double) * 2 * VMAXM * 4);
    for (Py_ssize_t r = j; r < n1; r++) {
        for (int c = 0; c < q * q; c++) ta[c * 4 + (r - j)] = A[(Py_ssize_t)c * n1 + r];
        for (int c = 0; c < q * m; c++) tb[c * 4 + (r - j)] = B[(Py_ssize_t)c * n1 + r];
    }
}

/* log det: the lanes' running products of det D_j, logged before they could overflow (det D_j >= 1) */
static ALWAYS_INLINE void
vdet(v4 det, v4 *prod, double *logsum, int *bad)
{
    v4 nxt = *prod * det;
    if (nxt[0] > 1e150 || nxt[1] > 1e150 || nxt[2] > 1e150 || nxt[3] > 1e150 ||
        !(det[0] > 0.0 && det[1] > 0.0 && det[2] > 0.0 && det[3] > 0.0)) {
        for (int l = 0; l < 4; l++) {
            if (!(det[l] > 0.0)) { *bad = 1; continue; }
            *logsum += log((*prod)[l]) + log(det[l]);
            (*prod)[l] = 1.0;
        }
        return;
    }
    *prod = nxt;
}

/* one step of four levels; A's and B's component c at a + c * st (st: n1 in place, 4 for the padded tail) */
static ALWAYS_INLINE void
vstep(const int q, const int m, const double *T, const double *a, const double *b, const Py_ssize_t st,
      v4 *aK, v4 *aQ, v4 *aG, v4 *prod, double *logsum, int *bad)
{
    if (q == 1) {
        const double t = T[0];
        const v4 a00 = vload(a);
        const v4 ta = a00 * t;
        const v4 d = ta * t + 1.0;
        const v4 di = 1.0 / d;
        vdet(d, prod, logsum, bad);
        aQ[0] += di * ta;
        const v4 mt = di * t;
        v4 bb[VMAXM], w[VMAXM], y[VMAXM], za[VMAXM];
        for (int k = 0; k < m; k++) {
            bb[k] = vload(b + k * st);
            w[k] = mt * bb[k];
            y[k] = w[k] * t;
            za[k] = bb[k] - a00 * y[k];
        }
        for (int k = 0; k < m; k++)
            for (int l = k; l < m; l++) aK[k * m + l] += bb[k] * y[l];
        for (int k = 0; k < m; k++)
            for (int l = 0; l < m; l++) aG[k * m + l] += za[k] * w[l];
        return;
    }
    const double t00 = T[0], t10 = T[2], t11 = T[3];
    const v4 a00 = vload(a), a01 = vload(a + st), a11 = vload(a + 3 * st);
    const v4 ta00 = a00 * t00 + a01 * t10, ta01 = a01 * t00 + a11 * t10;     /* TA = Tᵀ A_j */
    const v4 ta10 = a01 * t11, ta11 = a11 * t11;
    const v4 d00 = ta00 * t00 + ta01 * t10 + 1.0;                          /* D = TA T + I */
    const v4 d10 = ta10 * t00 + ta11 * t10;
    const v4 d11 = ta11 * t11 + 1.0;
    const v4 i0 = 1.0 / d00;
    const v4 l10 = d10 * i0;
    const v4 e1 = d11 - l10 * d10;
    const v4 i1 = 1.0 / e1;
    vdet(d00 * e1, prod, logsum, bad);
    const v4 di11 = i1, di10 = -l10 * i1, di00 = i0 + l10 * l10 * i1;       /* D⁻¹ */
    aQ[0] += di00 * ta00 + di10 * ta10;                                     /* Q += D⁻¹ TA */
    aQ[1] += di00 * ta01 + di10 * ta11;
    aQ[2] += di10 * ta00 + di11 * ta10;
    aQ[3] += di10 * ta01 + di11 * ta11;
    const v4 m00 = di00 * t00, m01 = di00 * t10 + di10 * t11;              /* D⁻¹ Tᵀ */
    const v4 m10 = di10 * t00, m11 = di10 * t10 + di11 * t11;
    v4 b0[VMAXM], b1[VMAXM], w0[VMAXM], w1[VMAXM], y0[VMAXM], y1[VMAXM], z0[VMAXM], z1[VMAXM];
    for (int k = 0; k < m; k++) {
        b0[k] = vload(b + k * st);
        b1[k] = vload(b + (m + k) * st);
        w0[k] = m00 * b0[k] + m01 * b1[k];                                  /* W = D⁻¹ Tᵀ B_j */
        w1[k] = m10 * b0[k] + m11 * b1[k];
        y0[k] = w0[k] * t00;                                                /* Y = T W */
        y1[k] = w0[k] * t10 + w1[k] * t11;
        z0[k] = b0[k] - (a00 * y0[k] + a01 * y1[k]);                       /* ZA = B_j − A_j Y */
        z1[k] = b1[k] - (a01 * y0[k] + a11 * y1[k]);
    }
    for (int k = 0; k < m; k++)
        for (int l = k; l < m; l++) aK[k * m + l] += b0[k] * y0[l] + b1[k] * y1[l];
    const int mm = m * m;
    for (int k = 0; k < m; k++)
        for (int l = 0; l < m; l++) {
            aG[k * m + l] += z0[k] * w0[l];
            aG[mm + k * m + l] += z0[k] * w1[l];
            aG[2 * mm + k * m + l] += z1[k] * w0[l];
            aG[3 * mm + k * m + l] += z1[k] * w1[l];
        }
}

static ALWAYS_INLINE void
vpass(const int q, const int m, const Py_ssize_t n1, const double *T, const double *A, const double *B,
      double *K, double *Q, double *G, double *ldL2, int *bad)
{
    const int qq = q * q, mm = m * m;
    v4 aK[VMAXM * VMAXM], aQ[4], aG[4 * VMAXM * VMAXM];
    for (int i = 0; i < mm; i++) aK[i] = vset(0.0);
    for (int i = 0; i < qq; i++) aQ[i] = vset(0.0);
    for (int i = 0; i < qq * mm; i++) aG[i] = vset(0.0);
    v4 prod = vset(1.0);
    double logsum = 0.0;
    Py_ssize_t j = 0;
    for (; j + 4 <= n1; j += 4)
        vstep(q, m, T, A + j, B + j, n1, aK, aQ, aG, &prod, &logsum, bad);
    if (j < n1) {                                  /* the tail, zero-padded */
        double ta[4 * 4], tb[2 * VMAXM * 4];
        vpad_tail(q, m, n1, j, A, B, ta, tb);
        vstep(q, m, T, ta, tb, 4, aK, aQ, aG, &prod, &logsum, bad);
    }
    for (int k = 0; k < m; k++)
        for (int l = k; l < m; l++) {
            const v4 v = aK[k * m + l];
            K[k * m + l] = K[l * m + k] = (v[0] + v[1]) + (v[2] + v[3]);
        }
    for (int i = 0; i < qq; i++) Q[i] = (aQ[i][0] + aQ[i][1]) + (aQ[i][2] + aQ[i][3]);
    for (int i = 0; i < qq * mm; i++) G[i] = (aG[i][0] + aG[i][1]) + (aG[i][2] + aG[i][3]);
    *ldL2 = logsum + (log(prod[0]) + log(prod[1])) + (log(prod[2]) + log(prod[3]));
}

/* The random effects at θ̂: per level û_j = D_j⁻¹ Tᵀ B_j c (c = [1, −β̂]) and the conditional-variance block
 * T D_j⁻¹ Tᵀ (lme4's condVar before σ²), four levels per step as above. U: q x n1, V: q x q x n1 (component-major). */
static ALWAYS_INLINE void
vmodes_step(const int q, const int m, const double *T, const double *c, const double *a, const double *b,
            const Py_ssize_t st, double *u, double *v, const Py_ssize_t ost)
{
    if (q == 1) {
        const double t = T[0];
        const v4 d = vload(a) * (t * t) + 1.0;
        const v4 di = 1.0 / d;
        v4 bc = vset(0.0);
        for (int k = 0; k < m; k++) bc += vload(b + k * st) * c[k];
        const v4 uu = di * t * bc, vv = di * (t * t);
        memcpy(u, &uu, sizeof uu);
        memcpy(v, &vv, sizeof vv);
        return;
    }
    const double t00 = T[0], t10 = T[2], t11 = T[3];
    const v4 a00 = vload(a), a01 = vload(a + st), a11 = vload(a + 3 * st);
    const v4 ta00 = a00 * t00 + a01 * t10, ta01 = a01 * t00 + a11 * t10;
    const v4 ta10 = a01 * t11, ta11 = a11 * t11;
    const v4 d00 = ta00 * t00 + ta01 * t10 + 1.0;
    const v4 d10 = ta10 * t00 + ta11 * t10;
    const v4 d11 = ta11 * t11 + 1.0;
    const v4 i0 = 1.0 / d00;
    const v4 l10 = d10 * i0;
    const v4 i1 = 1.0 / (d11 - l10 * d10);
    const v4 di11 = i1, di10 = -l10 * i1, di00 = i0 + l10 * l10 * i1;
    v4 bc0 = vset(0.0), bc1 = vset(0.0);
    for (int k = 0; k < m; k++) {
        bc0 += vload(b + k * st) * c[k];
        bc1 += vload(b + (m + k) * st) * c[k];
    }
    const v4 s0 = bc0 * t00 + bc1 * t10, s1 = bc1 * t11;                    /* Tᵀ B_j c */
    const v4 u0 = di00 * s0 + di10 * s1, u1 = di10 * s0 + di11 * s1;
    const v4 v00 = di00 * (t00 * t00);
    const v4 v10 = (di00 * t10 + di10 * t11) * t00;
    const v4 v11 = di00 * (t10 * t10) + di10 * (2.0 * t10 * t11) + di11 * (t11 * t11);
    memcpy(u, &u0, sizeof u0);
    memcpy(u + ost, &u1, sizeof u1);
    memcpy(v, &v00, sizeof v00);
    memcpy(v + ost, &v10, sizeof v10);
    memcpy(v + 2 * ost, &v10, sizeof v10);
    memcpy(v + 3 * ost, &v11, sizeof v11);
}

static ALWAYS_INLINE void
vmodes(const int q, const int m, const Py_ssize_t n1, const double *T, const double *c, const double *A,
       const double *B, double *U, double *V)
{
    Py_ssize_t j = 0;
    for (; j + 4 <= n1; j += 4)
        vmodes_step(q, m, T, c, A + j, B + j, n1, U + j, V + j, n1);
    if (j < n1) {
        const int qq = q * q;
        double ta[4 * 4], tb[2 * VMAXM * 4], tu[2 * 4] = {0}, tv[4 * 4] = {0};
        vpad_tail(q, m, n1, j, A, B, ta, tb);
        vmodes_step(q, m, T, c, ta, tb, 4, tu, tv, 4);
        for (Py_ssize_t r = j; r < n1; r++) {
            for (int k = 0; k < q; k++) U[(Py_ssize_t)k * n1 + r] = tu[k * 4 + (r - j)];
            for (int k = 0; k < qq; k++) V[(Py_ssize_t)k * n1 + r] = tv[k * 4 + (r - j)];
        }
    }
}

#if defined(__x86_64__) && defined(__linux__) && !defined(__clang__)
#define CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CLONES
#endif

/* vpass with q and m as constants (the loops over them unrolled, the vectors in registers) */
CLONES static int
vdispatch(const int q, const int m, const Py_ssize_t n1, const double *T, const double *A, const double *B,
          double *K, double *Q, double *G, double *ldL2)
{
    int bad = 0;
#define CASE(QQ, MM) if (q == QQ && m == MM) { vpass(QQ, MM, n1, T, A, B, K, Q, G, ldL2, &bad); return bad; }
    CASE(1, 1) CASE(1, 2) CASE(1, 3) CASE(1, 4) CASE(1, 5) CASE(1, 6)
    CASE(2, 1) CASE(2, 2) CASE(2, 3) CASE(2, 4) CASE(2, 5) CASE(2, 6)
#undef CASE
    return -2;
}

CLONES static int
vmodes_dispatch(const int q, const int m, const Py_ssize_t n1, const double *T, const double *c, const double *A,
                const double *B, double *U, double *V)
{
#define CASE(QQ, MM) if (q == QQ && m == MM) { vmodes(QQ, MM, n1, T, c, A, B, U, V); return 0; }
    CASE(1, 1) CASE(1, 2) CASE(1, 3) CASE(1, 4) CASE(1, 5) CASE(1, 6)
    CASE(2, 1) CASE(2, 2) CASE(2, 3) CASE(2, 4) CASE(2, 5) CASE(2, 6)
#undef CASE
    return -2;
}
#endif

static int
get(PyObject *obj, Py_buffer *view, Py_ssize_t n, int writable, const char *name)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    if (view->itemsize != 8 || !view->format || strcmp(view->format, "d") != 0 || view->len != n * 8) {
        PyErr_Format(PyExc_ValueError, "one_term: %s must be a contiguous float64 array of %zd values", name, n);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* the buffers of n arrays (get()); those from index `writable` on writable; all released on a failure */
static int
get_all(Py_buffer *vb, PyObject **objs, const Py_ssize_t *sizes, const char **names, int n, int writable)
{
    for (int i = 0; i < n; i++)
        if (get(objs[i], &vb[i], sizes[i], i >= writable, names[i]) < 0) {
            for (int k = 0; k < i; k++) PyBuffer_Release(&vb[k]);
            return -1;
        }
    return 0;
}

PyDoc_STRVAR(one_term_doc,
"one_term(T, A, B, K, Q, G, q, m, n1) -> log|L|²\n\n"
"One pass over the n1 levels of the only random-effects term (q columns, m = 1 + p columns of [y X]): T (q x q,\n"
"lower), A (q x q x n1), B (q x m x n1) in; K (m x m), Q (q x q), G (q x q x m x m) written. Raises\n"
"FloatingPointError when a block D_j is not positive definite.");

static PyObject *
one_term(PyObject *self, PyObject *args)
{
    PyObject *oT, *oA, *oB, *oK, *oQ, *oG;
    int q, m;
    Py_ssize_t n1;
    if (!PyArg_ParseTuple(args, "OOOOOOiin", &oT, &oA, &oB, &oK, &oQ, &oG, &q, &m, &n1))
        return NULL;
    if (q < 1 || q > MAXQ || m < 1 || m > 4096 || n1 < 0) {
        PyErr_Format(PyExc_ValueError, "one_term: q must be 1..%d and m 1..4096 (q=%d, m=%d)", MAXQ, q, m);
        return NULL;
    }
    Py_buffer vb[6];
    if (get_all(vb, (PyObject *[]){oT, oA, oB, oK, oQ, oG},
                (const Py_ssize_t[]){(Py_ssize_t)q * q, (Py_ssize_t)q * q * n1, (Py_ssize_t)q * m * n1,
                                     (Py_ssize_t)m * m, (Py_ssize_t)q * q, (Py_ssize_t)q * q * m * m},
                (const char *[]){"T", "A", "B", "K", "Q", "G"}, 6, 3) < 0)
        return NULL;
    const double *T = vb[0].buf, *A = vb[1].buf, *B = vb[2].buf;
    double *K = vb[3].buf, *Q = vb[4].buf, *G = vb[5].buf;
    double ld = 0.0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = -2;
#ifdef HAVE_VEC
    if (q <= 2 && m <= VMAXM)
        rc = vdispatch(q, m, n1, T, A, B, K, Q, G, &ld);
#endif
    if (rc != -2)
        ;
    else if (q == 1)
        rc = lane_pass(1, m, n1, T, A, B, K, Q, G, &ld);
    else if (q == 2)
        rc = lane_pass(2, m, n1, T, A, B, K, Q, G, &ld);
    else
        rc = level_pass(q, m, n1, T, A, B, K, Q, G, &ld);
    Py_END_ALLOW_THREADS
    for (int k = 0; k < 6; k++) PyBuffer_Release(&vb[k]);
    if (rc < 0) return PyErr_NoMemory();
    if (rc > 0) {
        PyErr_SetString(PyExc_FloatingPointError, "one_term: a random-effects block is not positive definite");
        return NULL;
    }
    return PyFloat_FromDouble(ld);
}

PyDoc_STRVAR(one_term_modes_doc,
"one_term_modes(T, A, B, c, U, V, q, m, n1) -> bool\n\n"
"The random effects at θ for q <= 2 and m <= 6: U (q x n1) the spherical modes D_j⁻¹Tᵀ B_j c, V (q x q x n1)\n"
"the blocks T D_j⁻¹ Tᵀ, written; c (m) = [1, −β]. False (nothing written) for other q and m.");

static PyObject *
one_term_modes(PyObject *self, PyObject *args)
{
    PyObject *oT, *oA, *oB, *oc, *oU, *oV;
    int q, m;
    Py_ssize_t n1;
    if (!PyArg_ParseTuple(args, "OOOOOOiin", &oT, &oA, &oB, &oc, &oU, &oV, &q, &m, &n1))
        return NULL;
    if (q < 1 || q > 2 || m < 1 || n1 < 0) Py_RETURN_FALSE;
#ifdef HAVE_VEC
    if (m > VMAXM) Py_RETURN_FALSE;
    Py_buffer vb[6];
    if (get_all(vb, (PyObject *[]){oT, oA, oB, oc, oU, oV},
                (const Py_ssize_t[]){(Py_ssize_t)q * q, (Py_ssize_t)q * q * n1, (Py_ssize_t)q * m * n1, m,
                                     (Py_ssize_t)q * n1, (Py_ssize_t)q * q * n1},
                (const char *[]){"T", "A", "B", "c", "U", "V"}, 6, 4) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    vmodes_dispatch(q, m, n1, vb[0].buf, vb[3].buf, vb[1].buf, vb[2].buf, vb[4].buf, vb[5].buf);
    Py_END_ALLOW_THREADS
    for (int k = 0; k < 6; k++) PyBuffer_Release(&vb[k]);
    Py_RETURN_TRUE;
#else
    Py_RETURN_FALSE;
#endif
}

static PyMethodDef methods[] = {
    {"one_term", one_term, METH_VARARGS, one_term_doc},
    {"one_term_modes", one_term_modes, METH_VARARGS, one_term_modes_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_lmmkernel",
    "The one-term LMM kernel (mrcstats.models.lmm_fit): the profiled deviance's per-level sums in one pass.",
    -1, methods,
};

PyMODINIT_FUNC
PyInit__lmmkernel(void)
{
    return PyModule_Create(&module);
}
