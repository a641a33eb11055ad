/* Compiles abi.h as strict C99 and uses a few of its types, so the layout
 * static asserts run in C too. */
#include <zcode/abi.h>

size_t zcode_abi_c99_sizes(void);
size_t zcode_abi_c99_sizes(void) {
  zc_table_header h;
  h.struct_size = (uint32_t)sizeof(zc_callback_table);
  h.kind = ZC_KIND_CALLBACK;
  h.kind_version = ZC_CALLBACK_TABLE_VERSION;
  h.reserved = 0;
  /* ABI 1.3: the estimate structs and slots compile as C99 too. */
  {
    zc_memory_estimate e = {0};
    zc_param_shape_sink sink = {0};
    zc_model_table mt = {0};
    zc_optimizer_table ot = {0};
    e.struct_size = (uint32_t)sizeof e;
    (void)sink;
    if (mt.estimate_memory != NULL || ot.estimate_memory != NULL) return 0;
    /* ABI 1.4: the instance's stream, the named tensor list and its slot. */
    {
      zc_create_args a = {0};
      zc_named_tensor_list l = {0};
      a.struct_size = (uint32_t)sizeof a;
      l.struct_size = (uint32_t)sizeof l;
      if (!ZC_STRUCT_HAS_FIELD(&a, zc_create_args, stream) || a.stream != NULL) return 0;
      if (mt.named_activations != NULL || l.count != 0) return 0;
    }
    return h.struct_size + sizeof(zc_host_services) + sizeof(zc_manifest) + e.struct_size;
  }
}
