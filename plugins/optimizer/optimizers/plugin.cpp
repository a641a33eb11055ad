// plugin.cpp: the `optimizers` plugin manifest: six optimizer components and
// the JSON Schema of the `optimizer` config section each one accepts.
#include "optimizers.h"

#include <zcode/sdk/plugin.h>

// Keys every optimizer accepts (see optimizer_base.h, param_groups.h).
#define ZC_OPT_COMMON(DEFAULT_WD)                                                                                                \
  R"("name":{"type":"string","description":"optimizer component name"},)"                                                        \
  R"("lr":{"type":"number","exclusiveMinimum":0,"default":0.001,"description":"base learning rate; the scheduler scales it"},)"  \
  R"("weight_decay":{"type":"number","minimum":0,"default":)" DEFAULT_WD R"(},)"                                                 \
  R"("decay_embeddings":{"type":"boolean","default":false,"description":"apply weight decay to ZC_PARAM_EMBEDDING tensors"},)"   \
  R"("param_groups":{"type":"array","default":[],"items":{"type":"object","additionalProperties":false,"required":["pattern"],)" \
  R"("properties":{"pattern":{"type":"string","description":"fnmatch glob over parameter names; first match wins"},)"            \
  R"("lr_mult":{"type":"number","minimum":0,"default":1},"weight_decay":{"type":"number","minimum":0}}}})"

#define ZC_OPT_BETAS(B1, B2)                                                                                                       \
  R"("betas":{"type":"array","items":{"type":"number","minimum":0,"exclusiveMaximum":1},"minItems":2,"maxItems":2,"default":[)" B1 \
  "," B2 R"(]})"

#define ZC_OPT_SCHEMA(DEFAULT_WD, OWN) \
  R"({"type":"object","additionalProperties":false,"properties":{)" ZC_OPT_COMMON(DEFAULT_WD) "," OWN "}}"

namespace {
using namespace zcode::optim;

constexpr const char* kAdamWSchema = ZC_OPT_SCHEMA(
    "0.01", ZC_OPT_BETAS("0.9", "0.999") R"(,"eps":{"type":"number","exclusiveMinimum":0,"default":1e-8})");
constexpr const char* kLambSchema = ZC_OPT_SCHEMA(
    "0.01",
    ZC_OPT_BETAS(
        "0.9",
        "0.999") R"(,"eps":{"type":"number","exclusiveMinimum":0,"default":1e-6},)"
                 R"("max_weight_norm":{"type":"number","exclusiveMinimum":0,"default":10,"description":"upper clamp of phi(||w||) in the trust ratio"},)"
                 R"("bias_correction":{"type":"boolean","default":true})");
constexpr const char* kAdafactorSchema = ZC_OPT_SCHEMA(
    "0",
    R"("eps":{"type":"number","minimum":0,"default":1e-30,"description":"eps1, added to g^2; the config-wide optimizer.eps default 1e-8 applies unless set"},)"
    R"("eps2":{"type":"number","minimum":0,"default":0.001,"description":"eps2, floor of RMS(w) in the relative step"},)"
    R"("decay_rate":{"type":"number","minimum":-1,"exclusiveMaximum":0,"default":-0.8,"description":"beta2_t = 1 - t^decay_rate"},)"
    R"("clip_threshold":{"type":"number","exclusiveMinimum":0,"default":1.0},)"
    R"("beta1":{"type":["number","null"],"minimum":0,"exclusiveMaximum":1,"default":null},)"
    R"("relative_step":{"type":"boolean","default":false},)"
    R"("scale_parameter":{"type":"boolean","default":false},)"
    R"("warmup_init":{"type":"boolean","default":false})");
constexpr const char* kSophiaSchema = ZC_OPT_SCHEMA(
    "0.1",
    ZC_OPT_BETAS(
        "0.965",
        "0.99") R"(,"rho":{"type":"number","exclusiveMinimum":0,"default":0.04,"description":"gamma of Algorithm 3, update clip(m / max(rho*h, eps), 1) per element"},)"
                R"("eps":{"type":"number","exclusiveMinimum":0,"default":1e-12},)"
                R"("hessian_update_interval":{"type":"integer","minimum":1,"default":10})");
#define ZC_SGD_OWN(MOMENTUM)                                                                    \
  R"("momentum":{"type":"number","minimum":0,"exclusiveMaximum":1,"default":)" MOMENTUM R"(},)" \
  R"("dampening":{"type":"number","minimum":0,"maximum":1,"default":0},)"                       \
  R"("nesterov":{"type":"boolean","default":false})"
constexpr const char* kSgdSchema = ZC_OPT_SCHEMA("0", ZC_SGD_OWN("0"));
constexpr const char* kZerosumSchema = ZC_OPT_SCHEMA("0", ZC_SGD_OWN("0.9"));
}  // namespace

ZCODE_PLUGIN(
    "optimizers", "1.0.0", "Apache-2.0", "AdamW, LAMB, Adafactor, Sophia-G, SGD and Zerosum-SGD (CPU, fp32)",
    ZCODE_COMPONENT(AdamW, "adamw", "Adam with decoupled weight decay (Loshchilov & Hutter 2019), as torch.optim.AdamW",
                    kAdamWSchema),
    ZCODE_COMPONENT(Lamb, "lamb", "Layer-wise adaptive moments (You et al. 2019, Algorithm 2)", kLambSchema),
    ZCODE_COMPONENT(Adafactor, "adafactor", "Factored second moments (Shazeer & Stern 2018)", kAdafactorSchema),
    ZCODE_COMPONENT(Sophia, "sophia", "Sophia-G, clipped diagonal Gauss-Newton preconditioning (Liu et al. 2023)",
                    kSophiaSchema),
    ZCODE_COMPONENT(Sgd, "sgd", "SGD with momentum, dampening and Nesterov, as torch.optim.SGD", kSgdSchema),
    ZCODE_COMPONENT(ZerosumSgd, "zerosum_sgd", "SGD-momentum with router updates centred over experts (MoE stability)",
                    kZerosumSchema))
