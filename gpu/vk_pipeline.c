/* vk_pipeline.c: compute pipelines from the SPIR-V embedded at build time
 * (vk_spv.h), specialized per use and cached; and the recorder that
 * turns a forward pass's calls into a command buffer (descriptor sets made
 * once per program, shared by every recorded variant; timestamps where the
 * profiling mode asks for them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_core.h"

/* ---- pipelines --------------------------------------------------------------- */

void vk_pipe_stats(const vk_ctx *c, VkPipeline pipe, char *buf, size_t n)
{
    if (n)
        buf[0] = 0;
    if (!c->pipe_stats || n == 0)
        return;
    PFN_vkGetPipelineExecutableStatisticsKHR get =
        (PFN_vkGetPipelineExecutableStatisticsKHR)vkGetDeviceProcAddr(c->dev, "vkGetPipelineExecutableStatisticsKHR");
    if (!get)
        return;
    VkPipelineExecutableInfoKHR ei = {.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR,
                                      .pipeline = pipe, .executableIndex = 0};
    VkPipelineExecutableStatisticKHR st[32];
    uint32_t ns = 32;
    for (uint32_t i = 0; i < ns; i++)
        st[i] = (VkPipelineExecutableStatisticKHR){.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR};
    VkResult r = get(c->dev, &ei, &ns, st);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE)
        return;
    size_t at = 0;
    for (uint32_t i = 0; i < ns && at + 1 < n; i++) {
        int w = 0;
        if (st[i].format == VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR)
            w = snprintf(buf + at, n - at, "%s%s=%llu", at ? " " : "", st[i].name,
                         (unsigned long long)st[i].value.u64);
        else if (st[i].format == VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR)
            w = snprintf(buf + at, n - at, "%s%s=%lld", at ? " " : "", st[i].name, (long long)st[i].value.i64);
        else if (st[i].format == VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR)
            w = snprintf(buf + at, n - at, "%s%s=%g", at ? " " : "", st[i].name, st[i].value.f64);
        if (w < 0 || (size_t)w >= n - at)
            break;
        at += (size_t)w;
    }
}

VkPipeline vk_pipe_get(vk_ctx *c, vk_pipes *p, const vk_spv *shader, const uint32_t *spec, uint32_t nspec,
                       err_t *err)
{
    if (nspec > VKC_MAX_SPEC) {
        err_set(err, "internal: %s: too many specialization constants", shader->name);
        return VK_NULL_HANDLE;
    }
    for (uint32_t i = 0; i < p->n; i++)
        if (p->e[i].nspec == nspec && p->e[i].shader == shader && memcmp(p->e[i].spec, spec, nspec * sizeof *spec) == 0)
            return p->e[i].pipe;
    if (p->n == p->cap) {
        uint32_t cap = p->cap ? p->cap * 2 : 32;
        vk_pipe_entry *ne = realloc(p->e, cap * sizeof *ne);
        if (!ne) {
            err_set(err, "out of host memory");
            return VK_NULL_HANDLE;
        }
        p->e = ne;
        p->cap = cap;
    }
    VkShaderModuleCreateInfo mci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                    .codeSize = shader->size,
                                    .pCode = shader->code};
    VkShaderModule mod;
    VkResult r = vkCreateShaderModule(c->dev, &mci, NULL, &mod);
    if (r != VK_SUCCESS) {
        vk_fail(c, err, r, "vkCreateShaderModule");
        return VK_NULL_HANDLE;
    }
    VkSpecializationMapEntry map[VKC_MAX_SPEC];
    for (uint32_t i = 0; i < nspec; i++)
        map[i] = (VkSpecializationMapEntry){.constantID = i, .offset = 4 * i, .size = 4};
    VkSpecializationInfo si = {.mapEntryCount = nspec, .pMapEntries = map, .dataSize = 4 * nspec, .pData = spec};
    /* Kernels are specialized for c->subgroup; pin it (and full subgroups)
     * where the device lets us, so team reductions see whole subgroups. */
    VkPipelineShaderStageRequiredSubgroupSizeCreateInfoEXT rs = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO_EXT,
        .requiredSubgroupSize = c->subgroup};
    bool pin = c->size_control && nspec > 0 && spec[0] % c->subgroup == 0;
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .flags = c->pipe_stats ? VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR : 0,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .pNext = pin ? &rs : NULL,
                  .flags = pin ? VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT_EXT : 0,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = mod,
                  .pName = "main",
                  .pSpecializationInfo = &si},
        .layout = c->pipe_layout};
    VkPipeline pipe;
    r = vkCreateComputePipelines(c->dev, VK_NULL_HANDLE, 1, &ci, NULL, &pipe);
    vkDestroyShaderModule(c->dev, mod, NULL);
    if (r != VK_SUCCESS) {
        vk_fail(c, err, r, "vkCreateComputePipelines");
        err_prefix(err, "shader %s", shader->name);
        return VK_NULL_HANDLE;
    }
    vk_pipe_entry *e = &p->e[p->n++];
    memset(e, 0, sizeof *e);
    e->shader = shader;
    memcpy(e->spec, spec, nspec * sizeof *spec);
    e->nspec = nspec;
    e->pipe = pipe;
    return pipe;
}

void vk_pipes_free(vk_ctx *c, vk_pipes *p)
{
    for (uint32_t i = 0; i < p->n; i++)
        vkDestroyPipeline(c->dev, p->e[i].pipe, NULL);
    free(p->e);
    memset(p, 0, sizeof *p);
}

/* ---- descriptor sets ------------------------------------------------------------ */

#define SETS_PER_POOL 256

static int alloc_set(vk_ctx *c, vk_prog *p, VkDescriptorSet *out, err_t *err)
{
    if (p->pool_left == 0) {
        VkDescriptorPool *np = realloc(p->pools, (p->n_pools + 1) * sizeof *np);
        if (!np)
            return err_set(err, "out of host memory");
        p->pools = np;
        VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                   .descriptorCount = SETS_PER_POOL * (VKC_WSLOTS + VKC_NBIND)};
        VkDescriptorPoolCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                         .maxSets = SETS_PER_POOL,
                                         .poolSizeCount = 1,
                                         .pPoolSizes = &ps};
        VkResult r = vkCreateDescriptorPool(c->dev, &ci, NULL, &p->pools[p->n_pools]);
        if (r != VK_SUCCESS)
            return vk_fail(c, err, r, "vkCreateDescriptorPool");
        p->n_pools++;
        p->pool_left = SETS_PER_POOL;
    }
    VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                      .descriptorPool = p->pools[p->n_pools - 1],
                                      .descriptorSetCount = 1,
                                      .pSetLayouts = &c->set_layout};
    VkResult r = vkAllocateDescriptorSets(c->dev, &ai, out);
    if (r != VK_SUCCESS)
        return vk_fail(c, err, r, "vkAllocateDescriptorSets");
    p->pool_left--;
    return 0;
}

static VkDescriptorBufferInfo buf_info(const vk_ctx *c, const vk_buf *b)
{
    if (!b->buf)
        return (VkDescriptorBufferInfo){.buffer = c->dummy_buf, .offset = 0, .range = VK_WHOLE_SIZE};
    return (VkDescriptorBufferInfo){.buffer = b->buf, .offset = b->off, .range = b->size};
}

static int define_call(vk_rec *r, const vk_call *k)
{
    vk_prog *p = r->p;
    if (p->n_disp == p->cap) {
        uint32_t cap = p->cap ? p->cap * 2 : 256;
        VkDescriptorSet *s = realloc(p->sets, cap * sizeof *s);
        if (s)
            p->sets = s;
        const char **n = realloc(p->names, cap * sizeof *n);
        if (n)
            p->names = n;
        uint64_t *b = realloc(p->bytes, cap * sizeof *b);
        if (b)
            p->bytes = b;
        int32_t *g = realloc(p->segment, cap * sizeof *g);
        if (g)
            p->segment = g;
        if (!s || !n || !b || !g)
            return err_set(r->err, "out of host memory");
        p->cap = cap;
    }
    VkDescriptorSet set;
    if (alloc_set(r->c, p, &set, r->err))
        return -1;
    VkDescriptorBufferInfo wi[VKC_WSLOTS], bi[VKC_NBIND];
    for (int i = 0; i < VKC_WSLOTS; i++)
        wi[i] = buf_info(r->c, &k->w[i]);
    for (int i = 0; i < VKC_NBIND; i++)
        bi[i] = buf_info(r->c, &k->b[1 + i]);
    VkWriteDescriptorSet wr[1 + VKC_NBIND];
    wr[0] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                   .dstSet = set,
                                   .dstBinding = 0,
                                   .descriptorCount = VKC_WSLOTS,
                                   .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                   .pBufferInfo = wi};
    for (int i = 0; i < VKC_NBIND; i++)
        wr[1 + i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                           .dstSet = set,
                                           .dstBinding = (uint32_t)(1 + i),
                                           .descriptorCount = 1,
                                           .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                           .pBufferInfo = &bi[i]};
    vkUpdateDescriptorSets(r->c->dev, 1 + VKC_NBIND, wr, 0, NULL);
    p->sets[p->n_disp] = set;
    p->names[p->n_disp] = k->name;
    p->bytes[p->n_disp] = k->bytes;
    p->segment[p->n_disp] = r->segment;
    p->n_disp++;
    return 0;
}

/* ---- the listing (bench --plan) ------------------------------------------------------- */

/* Binding `slot` of a dispatch: its buffer's number in order of first
 * appearance, offset and range. */
static void list_buf(vk_listing *l, const char *slot, int i, const vk_buf *b)
{
    if (!b->buf)
        return;
    uint32_t n = 0;
    while (n < l->n_bufs && l->bufs[n] != b->buf)
        n++;
    if (n == l->n_bufs && n < VK_LISTING_BUFS)
        l->bufs[l->n_bufs++] = b->buf;
    fprintf(l->f, " %s%d=b%u+%llu/%llu", slot, i, n, (unsigned long long)b->off, (unsigned long long)b->size);
}

static void list_call(vk_listing *l, const vk_call *k)
{
    const vk_pipe_entry *pe = NULL;
    for (uint32_t i = 0; l->pipes && i < l->pipes->n && !pe; i++)
        if (l->pipes->e[i].pipe == k->pipe)
            pe = &l->pipes->e[i];
    fprintf(l->f, "  %-16s %s spec=", k->name, pe ? pe->shader->name : "?");
    for (uint32_t i = 0; pe && i < pe->nspec; i++)
        fprintf(l->f, "%s%u", i ? "," : "", pe->spec[i]);
    if (k->indirect)
        list_buf(l, "grid", 0, k->indirect);
    else
        fprintf(l->f, " grid=%u,%u,%u", k->groups[0], k->groups[1], k->groups[2]);
    fprintf(l->f, " push=");
    for (uint32_t i = 0; i < k->npush; i++)
        fprintf(l->f, "%s%x", i ? "," : "", k->push[i]);
    for (int i = 0; i < VKC_WSLOTS; i++)
        list_buf(l, "w", i, &k->w[i]);
    for (int i = 1; i <= VKC_NBIND; i++)
        list_buf(l, "b", i, &k->b[i]);
    fputc('\n', l->f);
}

/* ---- recording ------------------------------------------------------------------ */

static bool timed(const vk_rec *r)
{
    if (r->mode == VK_PROF_ALL)
        return true;
    if (r->mode == VK_PROF_SEGMENT)
        return r->segment == r->timed_segment || r->segment == r->always_a || r->segment == r->always_b;
    return false;
}

static void stamp(vk_rec *r, int32_t what)
{
    if (r->nq >= r->qcap) {
        if (!r->status)
            r->status = err_set(r->err, "internal: profiler query pool too small (%u)", r->qcap);
        return;
    }
    r->q_disp[r->nq] = what;
    vkCmdWriteTimestamp(r->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, r->qpool, r->nq);
    r->nq++;
}

void vk_rec_begin(vk_rec *r, vk_ctx *c, vk_prog *p, VkCommandBuffer cb, int mode, int timed_segment,
                  VkQueryPool qpool, uint32_t qcap, int32_t *q_disp, err_t *err)
{
    memset(r, 0, sizeof *r);
    r->c = c;
    r->p = p;
    r->cb = cb;
    r->mode = qpool ? mode : VK_PROF_OFF;
    r->timed_segment = timed_segment;
    r->always_a = r->always_b = -100;
    r->qpool = qpool;
    r->qcap = qcap;
    r->q_disp = q_disp;
    r->err = err;
    r->segment = 0;
    if (r->qpool) {
        vkCmdResetQueryPool(cb, qpool, 0, qcap);
        stamp(r, -2); /* the token starts */
    }
}

void vk_rec_segment(vk_rec *r, int segment)
{
    r->segment = segment;
    if (r->list)
        fprintf(r->list->f, "segment %d\n", segment);
    if (timed(r))
        stamp(r, -1); /* a timed stretch starts here */
}

void vk_rec_call(vk_rec *r, const vk_call *k)
{
    if (r->status)
        return;
    vk_prog *p = r->p;
    if (!k->pipe) {
        r->status = err_set(r->err, "internal: kernel %s has no pipeline", k->name);
        return;
    }
    if (!p->defined) {
        if (define_call(r, k)) {
            r->status = -1;
            return;
        }
    } else if (r->disp >= p->n_disp || strcmp(p->names[r->disp], k->name) != 0) {
        r->status = err_set(r->err, "internal: variant recording diverged at dispatch %u (%s)", r->disp, k->name);
        return;
    }
    for (int i = 0; i < 3; i++)
        if (k->groups[i] > r->c->max_groups[i] && !k->indirect) {
            r->status = err_set(r->err, "internal: %s: %u workgroups in dimension %d exceeds the device limit %u",
                                k->name, k->groups[i], i, r->c->max_groups[i]);
            return;
        }
    vkCmdBindPipeline(r->cb, VK_PIPELINE_BIND_POINT_COMPUTE, k->pipe);
    vkCmdBindDescriptorSets(r->cb, VK_PIPELINE_BIND_POINT_COMPUTE, r->c->pipe_layout, 0, 1, &p->sets[r->disp], 0, NULL);
    vkCmdPushConstants(r->cb, r->c->pipe_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, VKC_PUSH_WORDS * 4, k->push);
    if (k->indirect)
        vkCmdDispatchIndirect(r->cb, k->indirect->buf, k->indirect->off);
    else if (k->groups[0] && k->groups[1] && k->groups[2])
        vkCmdDispatch(r->cb, k->groups[0], k->groups[1], k->groups[2]);
    if (timed(r))
        stamp(r, (int32_t)r->disp);
    if (r->list)
        list_call(r->list, k);
    r->disp++;
}

static void barrier(vk_rec *r, bool indirect)
{
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                           (indirect ? VK_ACCESS_INDIRECT_COMMAND_READ_BIT : 0)};
    vkCmdPipelineBarrier(r->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | (indirect ? VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT : 0), 0,
                         1, &mb, 0, NULL, 0, NULL);
    if (!r->p->defined)
        r->p->n_dep++;
    if (r->list)
        fprintf(r->list->f, "  | barrier%s\n", indirect ? " (and indirect grids)" : "");
}

void vk_rec_barrier(vk_rec *r)
{
    barrier(r, false);
}

void vk_rec_link(vk_rec *r, bool tagged)
{
    if (!r->p->defined) {
        r->p->n_dep++;
        r->p->n_link++;
        r->p->n_tagged += tagged ? 1 : 0;
    }
    if (r->list)
        fprintf(r->list->f, "  ~ link\n");
}

void vk_rec_barrier_indirect(vk_rec *r)
{
    barrier(r, true);
}

int vk_rec_end(vk_rec *r)
{
    if (r->qpool)
        stamp(r, -3); /* the token ends */
    if (!r->status && r->p->defined && r->disp != r->p->n_disp)
        r->status = err_set(r->err, "internal: variant recorded %u dispatches, expected %u", r->disp, r->p->n_disp);
    r->p->defined = true;
    return r->status;
}

void vk_prog_free(vk_ctx *c, vk_prog *p)
{
    for (uint32_t i = 0; i < p->n_pools; i++)
        vkDestroyDescriptorPool(c->dev, p->pools[i], NULL);
    free(p->pools);
    free(p->sets);
    free(p->names);
    free(p->bytes);
    free(p->segment);
    memset(p, 0, sizeof *p);
}
