/* cpu_pack.h: Q4_0, IQ4_NL, MXFP4, Q5_0 and Q8_0 weights interleaved by groups of rows
 * for the x86 kernels (cpu_pack_).
 *
 * In a file, a Q4_0 row is its blocks one after another (f16 d, 16 bytes of
 * nibbles: byte j holds elements j and j + 16).  A kernel that takes one row
 * at a time against a tile of tokens needs, per 64 multiply-adds, a
 * vpdpbusd, a conversion, a multiply and an FMA, and a 16-lane sum per row
 * at the end.  Packed, the same block of CPU_PACK_ROWS (16) consecutive rows
 * lies together:
 *     f16 d[16] | 4 chunks of 64 bytes: chunk c holds bytes 4c..4c+3 of
 *                 each of the 16 rows' nibbles (row r at 4r)
 * (288 bytes, the 16 blocks' own size), so one 64-byte load gives elements
 * 4c..4c+3 (low nibbles) and 16+4c..16+4c+3 (high nibbles) of all 16 rows,
 * one row per 32-bit lane: a block is 8 vpdpbusd against the token's 4
 * bytes broadcast, then one conversion, one multiply and one add for 16
 * rows (512 multiply-adds).  The last group of a matrix whose rows are not
 * a multiple of 16 is padded with zero rows (d = 0).
 *
 * Q8_0 the same way, its 32 signed bytes per row and block in 8 chunks:
 *     f16 d[16] | 8 chunks of 64 bytes: chunk c holds bytes 4c..4c+3 of
 *                 each of the 16 rows' levels plus 128 (row r at 4r)
 * (544 bytes, the 16 blocks' own size).  The levels are stored biased
 * (q + 128, an unsigned byte) because vpdpbusd wants its first operand
 * unsigned: with the token's bytes as the signed operand, the bias comes
 * off through the token's block sum (128 sum(x)), which the activation row
 * already holds -- nothing per row, and the dot per block stays exact.
 * The padding rows' bytes are 128 (level 0) under d = 0.
 *
 * IQ4_NL's blocks are Q4_0's (f16 d, 16 bytes of 4-bit codes in the same
 * order): packed exactly as Q4_0, the codes being indices into its table
 * of 16 signed levels, which the kernel looks up (a byte shuffle).
 *
 * MXFP4's blocks (an E8M0 exponent, 16 bytes of 4-bit codes in Q4_0's
 * order) as IQ4_NL's, the 16 rows' exponent bytes in the first 16 bytes of
 * the head (no half-precision scale holds every power of two it can
 * give): the kernel makes the scales from them and looks the codes up in
 * MXFP4's table of levels (AVX-512 VNNI: biased by 128 for vpdpbusd; the
 * 256-bit sets: signed, |l| x sign(x, l), its levels being small).
 *
 * Q5_0 as Q4_0 with its fifth bits between the scales and the nibbles:
 *     f16 d[16] | the 16 rows' 32-bit qh words (row r at 4r) | Q4_0's 4
 *                 chunks of 64 bytes of nibbles
 * (352 bytes, the 16 blocks' own size); the kernel adds each bit (16) to
 * its nibble, the offset of 16 coming off through the token's block sum.
 *
 * A packed row's sum is formed as the portable kernel forms it: per block
 * the exact integer dot product s, then acc += (d_w d_x) s in f32 (no FMA),
 * so the packed kernels give the portable set's bits.
 *
 * Why a copy: the file's bytes stay mapped and readable (other readers, e.g.
 * a GPU upload of the experts, use them); the packed copy is memory the
 * program owns, the size of the tensor (16 GB for a 30B model's experts).
 * On a Zen 4 the packed kernel multiplies tiles of tokens at ~2x the plain
 * one's rate (gpu/PERF.md), which is where a host-expert prompt's time goes.
 *
 * Promises:
 *  - cpu_pack_rows() writes the packed groups [g0, g1) of all the tensor's
 *    matrices (counted matrix after matrix); groups are independent, so
 *    threads may share a tensor by ranges.  Nothing is allocated.
 *  - cpu_packs holds the packed copies of a set of tensors, found by the
 *    tensor's data address (binary search, no allocation per look-up).
 */
#ifndef GLM_CPU_PACK_H
#define GLM_CPU_PACK_H

#include <stdbool.h>
#include <stdint.h>

#include "cpu_kernels.h"
#include "cpu_pool.h"
#include "base/error.h"
#include "model/model.h"

enum { CPU_PACK_ROWS = 16, CPU_PACK_Q4_0_BLOCK_BYTES = 288, CPU_PACK_Q5_0_BLOCK_BYTES = 352, CPU_PACK_Q8_0_BLOCK_BYTES = 544 };

/* Whether cpu_pack.h has a packed form for the type (Q4_0, IQ4_NL, MXFP4, Q5_0, Q8_0). */
static inline bool cpu_pack_type(uint32_t type)
{
    return type == QT_Q4_0 || type == QT_IQ4_NL || type == QT_MXFP4 || type == QT_Q5_0 || type == QT_Q8_0;
}
/* Bytes of 16 rows' blocks of 32 elements packed together. */
static inline uint64_t cpu_pack_block_bytes(uint32_t type)
{
    return type == QT_Q8_0   ? CPU_PACK_Q8_0_BLOCK_BYTES
           : type == QT_Q5_0 ? CPU_PACK_Q5_0_BLOCK_BYTES
                             : CPU_PACK_Q4_0_BLOCK_BYTES;
}
/* Bytes of one packed group (all of a row's blocks for 16 rows), of one
 * packed matrix, and of the whole tensor. */
static inline uint64_t cpu_pack_group_bytes(const mtensor *t)
{
    return t->ne[0] / 32 * cpu_pack_block_bytes(t->type);
}
static inline uint64_t cpu_pack_groups(const mtensor *t)
{
    return (t->ne[1] + CPU_PACK_ROWS - 1) / CPU_PACK_ROWS;
}
static inline uint64_t cpu_pack_matrix_bytes(const mtensor *t)
{
    return cpu_pack_groups(t) * cpu_pack_group_bytes(t);
}
uint64_t cpu_pack_bytes(const mtensor *t);

/* Whether kernel set k has a packed kernel for t (cpu_pack_type, rows of
 * whole blocks): only then is a packed copy worth making. */
bool cpu_pack_wanted(const cpu_kernels *k, const mtensor *t);

/* Packed groups [g0, g1) of t (cpu_pack_type; g counts over all matrices)
 * into dst (the whole tensor's packed bytes). */
void cpu_pack_rows(const mtensor *t, uint8_t *dst, uint64_t g0, uint64_t g1);

typedef struct cpu_packs cpu_packs;

cpu_packs *cpu_packs_new(err_t *err);
void cpu_packs_free(cpu_packs *ps);
/* Packs t (when cpu_pack_wanted and not already held) with every thread of
 * pool p; an error only when memory runs out. */
int cpu_packs_add(cpu_packs *ps, cpu_pool *p, const cpu_kernels *k, const mtensor *t, err_t *err);
/* t's packed bytes, or NULL when t has none. */
const uint8_t *cpu_packs_find(const cpu_packs *ps, const mtensor *t);
/* Bytes held. */
uint64_t cpu_packs_bytes(const cpu_packs *ps);

/* Whether `bytes` more of packed copies leave room: at most 3/4 of the
 * memory the system says is available now (/proc/meminfo's MemAvailable,
 * which counts the file's cached pages as reclaimable; where it cannot be
 * read, yes).  A tensor that does not fit stays unpacked: its rows then go
 * through the plain kernels, slower, within the same bounds but not the
 * same bits. */
bool cpu_pack_fits(uint64_t bytes);

/* The matrices of layer L that kernel set k would pack, and their bytes. */
uint64_t cpu_pack_layer_bytes(const cpu_kernels *k, const model_layer *L);
/* The same over the model's layers and head: what the CPU backend packs
 * at open (without the NextN block, packed too when it drafts). */
uint64_t cpu_pack_model_bytes(const cpu_kernels *k, const model *m);
/* Packs them (those that fit); the error only when memory runs out. */
int cpu_packs_add_layer(cpu_packs *ps, cpu_pool *p, const cpu_kernels *k, const model_layer *L, err_t *err);

#endif
