// A SchemaProvider for the config tests that knows the real glm52 options
// schema (plugins/model/glm52/schema.h: the one home of the model's options
// and defaults) and accepts any options for every other component.
#pragma once

#include <zcode/core/config.h>

#include "schema.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace config_test {

class Glm52SchemaProvider : public zcode::SchemaProvider {
 public:
  std::optional<std::string> options_schema(zc_kind kind, std::string_view) const override {
    return kind == ZC_KIND_MODEL ? std::string(glm52::kOptionsSchema) : std::string("{}");
  }
  std::vector<std::string> component_names(zc_kind) const override { return {"any"}; }
};

}  // namespace config_test
