// part_layout.glsl: the attention partials' layout, shared by the kernels
// that write them (attn, attn_fd) and read them (attn_vb, attnx_vb,
// attn_combine).  A partial (one token, chunk and head) is PART_HDR words
// -- m, l, padding -- then the kv_lora latent sums; partials lie (token,
// chunk, head)-major, so a chunk's heads are side by side.  PART_HDR keeps
// every latent row 128-byte aligned when kv_lora is a multiple of 32, which
// attn_fd's fragment stores need to run at full speed.  Must equal
// VK_PART_HDR (gpu/vk_kernels.h).
const uint PART_HDR = 32u;
