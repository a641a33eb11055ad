// estimate_run_memory (zcode/core/preflight.h) over model and optimizer
// tables as plugins of each ABI minor build them: a 1.3 table answers
// through estimate_memory (the optimizer reading the model's parameter
// shapes, never their data), a 1.2 table (struct_size ends before the slot)
// keeps working and its part of the estimate is reported unknown.
#include <zcode/core/host_services.h>
#include <zcode/core/preflight.h>
#include <zcode/core/registry.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <string>

namespace {

zc_status* model_estimate(const zc_create_args*, const zc_param_shape_sink* shapes, zc_memory_estimate* out) {
  const int64_t w[2] = {4, 8}, b[1] = {8};
  if (shapes) {
    shapes->put(shapes->ctx, "w", 2, w, 0);
    shapes->put(shapes->ctx, "b", 1, b, ZC_PARAM_NO_DECAY);
  }
  out->parameter_bytes = 1000;
  out->gradient_bytes = 1000;
  out->activation_bytes = 5000;
  return nullptr;
}

// Two fp32 moments per parameter element, read from the shape-only model.
zc_status* optimizer_estimate(const zc_create_args* a, zc_memory_estimate* out) {
  const auto* mt = static_cast<const zc_model_table*>(a->model.table);
  zc_param_list list{};
  if (zc_status* s = mt->params(a->model.instance, &list)) return s;
  uint64_t n = 0;
  for (size_t i = 0; i < list.count; ++i) {
    if (list.params[i].value->data != nullptr) return zcode::make_status(ZC_ERR_INTERNAL, "data is not NULL");
    uint64_t e = 1;
    for (int32_t d = 0; d < list.params[i].value->ndim; ++d) e *= static_cast<uint64_t>(list.params[i].value->shape[d]);
    n += e;
  }
  out->optimizer_state_bytes = 2 * 4 * n;
  return nullptr;
}

zc_status* unsupported_estimate(const zc_create_args*, zc_memory_estimate*) {
  return zcode::make_status(ZC_ERR_UNSUPPORTED, "no estimate");
}

zcode::PluginFile file{"/fake/libzcode_fake.so", "fake", "1.0.0", "MIT", "", 1, 3};

zcode::Component component(zc_kind kind, const char* name, const void* table) {
  zcode::Component c;
  c.kind = kind;
  c.name = name;
  c.table = table;
  c.file = &file;
  return c;
}

TEST(MemoryEstimate, Abi13TablesAnswerAndTheOptimizerSeesShapesOnly) {
  zc_model_table mt{};
  mt.header = {sizeof(zc_model_table), ZC_KIND_MODEL, ZC_MODEL_TABLE_VERSION, 0};
  mt.estimate_memory = &model_estimate;
  zc_optimizer_table ot{};
  ot.header = {sizeof(zc_optimizer_table), ZC_KIND_OPTIMIZER, ZC_OPTIMIZER_TABLE_VERSION, 0};
  ot.estimate_memory = &optimizer_estimate;
  const zcode::Component m = component(ZC_KIND_MODEL, "m", &mt), o = component(ZC_KIND_OPTIMIZER, "o", &ot);
  zc_create_args a{};
  a.struct_size = sizeof a;
  const zcode::MemoryEstimate e = zcode::estimate_run_memory(m, a, &o, a);
  EXPECT_EQ(e.parameters, 1000u);
  EXPECT_EQ(e.gradients, 1000u);
  EXPECT_EQ(e.activations, 5000u);
  EXPECT_EQ(e.optimizer_state, 2u * 4u * (4u * 8u + 8u));  // 320 bytes
  EXPECT_TRUE(e.unknown.empty());
  EXPECT_EQ(e.known_total(), 1000u + 1000u + 5000u + 320u);
}

TEST(MemoryEstimate, Abi12PluginsKeepLoadingAndTheirPartIsUnknown) {
  // A 1.2 model table ends after `activations`; a 1.2 optimizer table after
  // `update_hessian`. The slot's memory past struct_size is never read.
  zc_model_table mt{};
  mt.header = {offsetof(zc_model_table, estimate_memory), ZC_KIND_MODEL, 3, 0};
  mt.estimate_memory = &model_estimate;  // beyond struct_size: must be ignored
  zc_optimizer_table ot{};
  ot.header = {offsetof(zc_optimizer_table, estimate_memory), ZC_KIND_OPTIMIZER, 1, 0};
  const zcode::Component m = component(ZC_KIND_MODEL, "m", &mt), o = component(ZC_KIND_OPTIMIZER, "o", &ot);
  zc_create_args a{};
  const zcode::MemoryEstimate e = zcode::estimate_run_memory(m, a, &o, a);
  EXPECT_FALSE(e.parameters.has_value());
  EXPECT_FALSE(e.optimizer_state.has_value());
  ASSERT_EQ(e.unknown.size(), 2u);
  EXPECT_EQ(e.unknown[0],
            "model: model 'm' (/fake/libzcode_fake.so) has no estimate_memory (built for ABI 1.2 or older)");
  EXPECT_EQ(e.unknown[1],
            "optimizer state: optimizer 'o' (/fake/libzcode_fake.so) has no estimate_memory (built for "
            "ABI 1.2 or older)");
  EXPECT_EQ(e.describe(),
            "parameters unknown, gradients unknown, optimizer state unknown, activation workspace "
            "unknown: total 0.0 MiB + unknown");
}

TEST(MemoryEstimate, UnsupportedIsUnknownAndOtherFailuresThrow) {
  zc_model_table mt{};
  mt.header = {sizeof(zc_model_table), ZC_KIND_MODEL, ZC_MODEL_TABLE_VERSION, 0};
  mt.estimate_memory = &model_estimate;
  zc_optimizer_table ot{};
  ot.header = {sizeof(zc_optimizer_table), ZC_KIND_OPTIMIZER, ZC_OPTIMIZER_TABLE_VERSION, 0};
  ot.estimate_memory = &unsupported_estimate;
  const zcode::Component m = component(ZC_KIND_MODEL, "m", &mt), o = component(ZC_KIND_OPTIMIZER, "o", &ot);
  zc_create_args a{};
  zcode::MemoryEstimate e = zcode::estimate_run_memory(m, a, &o, a);
  EXPECT_EQ(e.parameters, 1000u);
  EXPECT_FALSE(e.optimizer_state.has_value());
  ASSERT_EQ(e.unknown.size(), 1u);
  EXPECT_EQ(e.unknown[0], "optimizer state: optimizer 'o' (/fake/libzcode_fake.so) does not estimate its memory");
  ot.estimate_memory = [](const zc_create_args*, zc_memory_estimate*) {
    return zcode::make_status(ZC_ERR_INVALID_ARGUMENT, "optimizer.betas: bad");
  };
  try {
    zcode::estimate_run_memory(m, a, &o, a);
    FAIL();
  } catch (const zcode::PluginError& err) {
    EXPECT_EQ(std::string(err.what()),
              "optimizer 'o' (/fake/libzcode_fake.so): estimate_memory failed: optimizer.betas: bad");
  }
}

}  // namespace
