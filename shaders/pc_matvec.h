/* pc_matvec.h: the decode matrix-vector kernels' interfaces (pc_common.h):
 * the slots the mv family (mv_common.glsl: mv, mv_glu, mv_moe_down, router,
 * attn_vb) and the x-stationary family (mv_xs_common.glsl: mv_xs, mv_glu_xs,
 * mv_moe_down_xs, router_xs, attn_vb_xs) share, then each pair's push constants and
 * slots of its own (attn_vb's in pc_attn.h). */
#ifndef PC_MATVEC_H
#define PC_MATVEC_H

#include "pc_common.h"

/* Both families read their input at binding 1 and the RMSNorm weight at 3. */
PC_ENUM_BEGIN(pc_matvec_binding)
PC_ENUM(MATVEC_B_X, 1)
PC_ENUM(MATVEC_B_NORM, 3)
PC_ENUM_END(pc_matvec_binding)

/* The mv family's common specialization constants (each kernel names its
 * own from 5 on). */
PC_ENUM_BEGIN(pc_mv_family_spec)
PC_ENUM(MVF_S_TYPE, 1)          /* weight type (quant.glsl T_*) */
PC_ENUM(MVF_S_TEAM, 2)          /* threads per row: a power of two <= the subgroup */
PC_ENUM(MVF_S_NR, 3)            /* rows per team */
PC_ENUM(MVF_S_SG, 4)            /* subgroup size */
PC_ENUM_END(pc_mv_family_spec)

/* The x-stationary family's (each kernel names its own in 6, 7, 9). */
PC_ENUM_BEGIN(pc_xs_family_spec)
PC_ENUM(XS_S_TYPE, 1)           /* weight type */
PC_ENUM(XS_S_TEAM, 2)           /* threads per row */
PC_ENUM(XS_S_J, 3)              /* units of a row per lane */
PC_ENUM(XS_S_R, 4)              /* rows per pass */
PC_ENUM(XS_S_SG, 5)             /* subgroup size */
PC_ENUM(XS_S_KSH, 8)            /* staged input floats */
PC_ENUM(XS_S_XREG, 10)          /* 1: a lane's inputs in registers */
PC_ENUM(XS_S_XRN, 11)           /* input registers per lane (1 without XREG) */
PC_ENUM(XS_S_COUNT, 16)         /* constants every x-stationary kernel is built with (the dependency ends and LL last) */
PC_ENUM_END(pc_xs_family_spec)

/* ---- mv, mv_xs: y[z] (=|+=) W[m(z)] . x[z] ---- */
#if PC_HOST || defined(PC_USE_MV)
PC_BEGIN(pc_mv)
    PC_U32 K, Kp, N;
    PC_U32 hbase;       /* head byte offset of the weight tensor */
    PC_U32 mat_blocks;  /* blocks per matrix */
    PC_U32 x_off, x_z;  /* input: base and stride per z (floats) */
    PC_U32 y_off, y_z;  /* output */
    PC_U32 nw_off;
    PC_F32 eps;
    PC_U32 ids_off;
    PC_U32 last_row;    /* non-zero: the input is the batch's last token, rows last_row floats apart */
    PC_U32 passes;      /* mv_xs: row passes per team */
    PC_U32 dep_signal;  /* mv_xs SIGNAL: this dispatch's counter */
    PC_U32 dep_wait, dep_n; /* mv_xs WAIT: the producers' counter and workgroups */
    PC_U32 ll_in, ll_out;   /* mv_xs_ll: the sites of the input's and the output's tags (dep_flag.glsl) */
PC_END(pc_mv)
#endif
PC_ENUM_BEGIN(pc_mv_binding)
PC_ENUM(MV_B_Y, 2)
PC_ENUM(MV_B_IDS, 4)
PC_ENUM(MV_B_PARAMS, 5)
PC_ENUM_END(pc_mv_binding)

PC_ENUM_BEGIN(pc_mv_spec)
PC_ENUM(MV_S_NORM, 5)           /* mv: input RMSNorm(x) * nw */
PC_ENUM(MV_S_OMODE, 6)          /* mv: 1 adds into y */
PC_ENUM(MV_S_KSH, 7)
PC_ENUM(MV_S_IDMODE, 8)         /* mv: 1 matrix ids[z] */
PC_ENUM(MV_S_UPT, 9)            /* mv: units per thread */
PC_ENUM(MV_S_COUNT, 10)
PC_ENUM(MV_XS_S_NORM, 6)        /* mv_xs: as mv's */
PC_ENUM(MV_XS_S_OMODE, 7)
PC_ENUM(MV_XS_S_IDMODE, 9)
PC_ENUM_END(pc_mv_spec)

/* ---- mv_glu, mv_glu_xs: h[z] = silu(G[m(z)] . n) * (U[m(z)] . n); every z reads the same input ---- */
#if PC_HOST || defined(PC_USE_GLU)
PC_BEGIN(pc_glu)
    PC_U32 K, Kp, N;
    PC_U32 hbase_g, hbase_u;
    PC_U32 mblk_g, mblk_u;  /* blocks per matrix */
    PC_U32 x_off;
    PC_U32 h_off, h_z;
    PC_U32 nw_off;
    PC_F32 eps;
    PC_U32 ids_off;
    PC_U32 nz;              /* mv_glu_xs: matrices (grid y) */
    PC_U32 passes;          /* mv_glu_xs: row passes per team */
    PC_U32 dep_signal;      /* mv_glu_xs SIGNAL: this dispatch's counter */
    PC_U32 dep_wait, dep_n; /* mv_glu_xs WAIT: the producers' counter and workgroups */
PC_END(pc_glu)
#endif
PC_ENUM_BEGIN(pc_glu_binding)
PC_ENUM(GLU_B_H, 2)
PC_ENUM(GLU_B_IDS, 4)
PC_ENUM(GLU_B_PARAMS, 7)        /* mv_glu_xs: the epoch of a WAIT */
PC_ENUM_END(pc_glu_binding)

PC_ENUM_BEGIN(pc_glu_spec)
PC_ENUM(GLU_S_NORM, 5)          /* mv_glu: input RMSNorm(x) * nw */
PC_ENUM(GLU_S_TYPE2, 6)         /* mv_glu: up's weight type */
PC_ENUM(GLU_S_KSH, 7)
PC_ENUM(GLU_S_IDMODE, 8)        /* mv_glu: matrix ids[z] */
PC_ENUM(GLU_S_UPT, 9)
PC_ENUM(GLU_S_COUNT, 10)
PC_ENUM(GLU_XS_S_NORM, 6)       /* mv_glu_xs: as mv_glu's */
PC_ENUM(GLU_XS_S_IDMODE, 9)
PC_ENUM_END(pc_glu_spec)

/* ---- mv_moe_down, mv_moe_down_xs: y += sum_z wt[z] * (D[ids[z]] . h[z]) + (S . h_s), or + ysh ---- */
#if PC_HOST || defined(PC_USE_MOE_DOWN)
PC_BEGIN(pc_moe_down)
    PC_U32 K, Kp, N;        /* routed expert width */
    PC_U32 hbase, mblk;
    PC_U32 K2, Kp2, hbase2; /* shared expert width */
    PC_U32 h_off, h_z, nz;
    PC_U32 ids_off, wts_off;
    PC_U32 y_off;
    PC_U32 passes;          /* mv_moe_down_xs: row passes per team */
    PC_U32 dep_signal;      /* mv_moe_down_xs SIGNAL: this dispatch's counter */
    PC_U32 dep_wait, dep_n; /* mv_moe_down_xs WAIT: the producers' counter and workgroups */
    PC_U32 ids_wait, ids_n; /* mv_moe_down_xs WAIT with ids_n > 0: the ids' producers (the router), awaited first */
    PC_U32 ysh_off;         /* mv_moe_down_xs HAS_SHARED 2: the shared expert's product */
PC_END(pc_moe_down)
#endif
PC_ENUM_BEGIN(pc_moe_down_binding)
PC_ENUM(DOWN_B_Y, 2)
PC_ENUM(DOWN_B_IDS, 4)
PC_ENUM(DOWN_B_WTS, 5)
PC_ENUM(DOWN_B_YSH, 6)          /* mv_moe_down_xs HAS_SHARED 2: the shared expert's product, added */
PC_ENUM(DOWN_B_PARAMS, 7)       /* mv_moe_down_xs: the epoch of a WAIT */
PC_ENUM_END(pc_moe_down_binding)

PC_ENUM_BEGIN(pc_moe_down_spec)
PC_ENUM(DOWN_S_HAS_SHARED, 5)   /* mv_moe_down */
PC_ENUM(DOWN_S_TYPE2, 6)        /* mv_moe_down: the shared down's weight type */
PC_ENUM(DOWN_S_KSH, 7)
PC_ENUM(DOWN_S_UPT, 8)
PC_ENUM(DOWN_S_NSLOT, 9)        /* mv_moe_down: routed experts + shared */
PC_ENUM(DOWN_S_COUNT, 10)
PC_ENUM(DOWN_XS_S_HAS_SHARED, 6) /* mv_moe_down_xs: 0 none, 1 the shared down here, 2 its product added (ysh) */
PC_ENUM_END(pc_moe_down_spec)

/* ---- router, router_xs: the MoE gate of one token (router_tail.glsl) ---- */
#if PC_HOST || defined(PC_USE_ROUTER)
PC_BEGIN(pc_router)
    PC_U32 K, Kp, N;        /* N = experts */
    PC_U32 hbase;
    PC_U32 x_off, x_z;
    PC_U32 nw_off;
    PC_F32 eps;
    PC_U32 n_used;
    PC_U32 gating;          /* 1 softmax, 2 sigmoid */
    PC_U32 has_bias, norm_w;
    PC_F32 scale;           /* 0: none */
    PC_U32 out_off;         /* ids/weights of token z at out_off + z*n_used */
    PC_U32 l_off;           /* logits scratch of token z at l_off + z*N */
    PC_U32 bias_off;
    PC_U32 check_batch;     /* 1: tokens past params[VKP_NTOK] have nothing to do */
    PC_U32 passes;          /* router_xs: row passes per team */
    PC_U32 dep_signal;      /* router_xs SIGNAL: this dispatch's counter */
    PC_U32 dep_wait, dep_n; /* router_xs WAIT: the producers' counter and workgroups */
PC_END(pc_router)
#endif
PC_ENUM_BEGIN(pc_router_binding)
PC_ENUM(ROUTER_B_LOGITS, 2)
PC_ENUM(ROUTER_B_IDS, 4)
PC_ENUM(ROUTER_B_WTS, 5)
PC_ENUM(ROUTER_B_BIAS, 6)
PC_ENUM(ROUTER_B_COUNT, 7)      /* finished workgroups per token (the last picks) */
PC_ENUM(ROUTER_B_PARAMS, 8)
PC_ENUM_END(pc_router_binding)

PC_ENUM_BEGIN(pc_router_spec)
PC_ENUM(ROUTER_S_KSH, 5)        /* router */
PC_ENUM(ROUTER_S_UPT, 6)        /* router */
PC_ENUM(ROUTER_S_EPL, 7)        /* both: experts per lane in the tail */
PC_ENUM(ROUTER_S_COUNT, 8)
PC_ENUM_END(pc_router_spec)

#endif
