// zcode/core/config_reference.h: docs/config-reference.md, rendered from the
// built-in schema (HarnessConfig::builtin_schema_json, the field table in
// core/src/config_schema.cpp) and each bundled plugin's options schema.
//
//   std::string md = zcode::render_config_reference(template_text, components);
//
// The template (docs/config-reference.md.in) holds the prose; the tool
// core/tools/config_reference_main.cpp writes the page (CMake target
// `config-reference`) and the ctest `config.reference_is_current` fails when
// the committed page is not what it renders.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace zcode {

/// One plugin component's options, as `zcode-host plugins show NAME` prints them.
struct ComponentOptions {
  std::string kind;                 ///< "optimizer" (kind_name)
  std::string name;                 ///< "adamw"
  std::string description;          ///< the manifest's one line
  std::string options_schema_json;  ///< its JSON Schema
};

/// `template_text` with each line that is exactly one of these markers
/// replaced (the other lines are copied):
///   <!-- fields: SECTION -->  the table of the built-in schema's SECTION
///                             (`top`: the top-level fields that are not sections)
///   <!-- plugins -->          one subsection per component of `components`,
///                             in the order given, each with its options table.
/// A table has the columns key | type | default | bounds | description; a
/// nested object's keys follow it as `parent.key`. Throws
/// std::invalid_argument naming a SECTION the schema does not have.
std::string render_config_reference(std::string_view template_text, const std::vector<ComponentOptions>& components);

}  // namespace zcode
