// zcode-host plugins list | show NAME.
#include "cli_common.h"
#include "commands.h"

#include <zcode/core/log.h>
#include <zcode/sdk/suggest.h>

#include <rapidjson/document.h>
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <algorithm>
#include <iomanip>
#include <iostream>

namespace zcode::host {
namespace {

std::string abi_of(const Component& c) {
  return std::to_string(c.file->abi_major) + "." + std::to_string(c.file->abi_minor);
}

int list(const Registry& reg) {
  reg.load_all();
  std::vector<const Component*> comps = reg.components();
  std::vector<std::vector<std::string>> rows = {{"NAME", "KIND", "VERSION", "ABI", "FILE"}};
  for (const Component* c : comps)
    rows.push_back({c->name, kind_name(c->kind), c->file->version, abi_of(*c), c->file->path.string()});
  std::vector<size_t> w(5, 0);
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size(); ++i) {
      std::cout << r[i];
      if (i + 1 < r.size()) std::cout << std::string(w[i] - r[i].size() + 2, ' ');
    }
    std::cout << "\n";
  }
  if (comps.empty()) {
    std::cout << "(no plugins found; searched:";
    for (const SearchDir& d : reg.search_dirs()) std::cout << " " << d.path.string() << " (" << d.origin << ")";
    std::cout << ")\n";
  }
  // Refused files were already logged, one line each, as they were met.
  return reg.problems().empty() ? kOk : kRuntimeError;
}

// The schema's top-level properties that declare a default, as `key: value`.
std::vector<std::string> defaults_of(const rapidjson::Document& schema) {
  std::vector<std::string> out;
  if (!schema.IsObject() || !schema.HasMember("properties") || !schema["properties"].IsObject()) return out;
  for (const auto& m : schema["properties"].GetObject()) {
    if (!m.value.IsObject() || !m.value.HasMember("default")) continue;
    rapidjson::StringBuffer sb;
    rapidjson::Writer<rapidjson::StringBuffer> w(sb);
    m.value["default"].Accept(w);
    out.push_back(std::string(m.name.GetString()) + ": " + sb.GetString());
  }
  return out;
}

int show(const Registry& reg, const std::string& name, const std::string& kind) {
  const Component* c = nullptr;
  if (!kind.empty()) {
    auto k = parse_kind(kind);
    if (!k) {
      std::cerr << "zcode-host plugins show: --kind: '" << kind
                << "' is not one of tokenizer, dataloader, model, optimizer, scheduler, evaluator, callback\n";
      return kUsageError;
    }
    c = reg.find(*k, name);
  } else {
    c = reg.find_any(name);
  }
  if (!c) {
    // The same hint as a misspelt name in a config (find_any loaded every file).
    std::vector<std::string> names;
    reg.load_all();
    for (const Component* comp : reg.components())
      if (kind.empty() || comp->kind == *parse_kind(kind)) names.push_back(comp->name);
    log::error("plugins show: no component named '" + name + "' on the plugin path" +
               sdk::did_you_mean_hint(name, names) + " (see zcode-host plugins list)");
    return kUsageError;
  }
  std::cout << c->name << " (" << kind_name(c->kind) << ")\n"
            << "  " << c->description << "\n"
            << "plugin:  " << c->file->name << " " << c->file->version << " (" << c->file->license << "), ABI "
            << abi_of(*c) << "\n"
            << "file:    " << c->file->path.string() << "\n";
  rapidjson::Document schema;
  schema.Parse(c->options_schema_json.c_str());
  if (schema.HasParseError()) {
    std::cout << "options schema (not valid JSON!):\n" << c->options_schema_json << "\n";
    return kRuntimeError;
  }
  rapidjson::StringBuffer sb;
  rapidjson::PrettyWriter<rapidjson::StringBuffer> w(sb);
  w.SetIndent(' ', 2);
  schema.Accept(w);
  std::cout << "options schema:\n" << sb.GetString() << "\n";
  std::vector<std::string> defs = defaults_of(schema);
  std::cout << "defaults:" << (defs.empty() ? " (none declared)" : "") << "\n";
  for (const auto& d : defs) std::cout << "  " << d << "\n";
  return kOk;
}

}  // namespace

int cmd_plugins(const std::vector<std::string>& args) {
  // stdout is this command's data (text, ids, listings): log lines, INFO too, go to stderr.
  log::set_data_on_stdout(true);
  const CommandHelp help{"zcode-host plugins list | show NAME [--kind K] [--plugin-path P]...",
                         "list: name, kind, version, ABI and file of every component on the plugin path "
                         "(exit 1 when a file was refused).\n"
                         "show: one component's description, options schema and defaults.",
                         "  zcode-host plugins list --plugin-path ./my-plugins\n  zcode-host plugins show adamw"};
  std::string action, name, kind;
  PluginFlags plugins;
  po::options_description d("options");
  d.add_options()("action", po::value(&action)->required(), "list or show")(
      "name", po::value(&name), "component name (show)")("kind", po::value(&kind),
                                                         "component kind, when a name exists for several kinds (show)");
  plugins.add_to(d);
  po::positional_options_description pos;
  pos.add("action", 1).add("name", 1);
  po::variables_map vm;
  if (auto rc = parse_args("plugins", args, d, pos, vm, help)) return *rc;
  try {
    Registry reg(plugins.search());
    if (action == "list") {
      if (!name.empty()) {
        std::cerr << "zcode-host plugins list: unexpected argument '" << name << "'\n";
        return kUsageError;
      }
      return list(reg);
    }
    if (action == "show") {
      if (name.empty()) {
        std::cerr << "zcode-host plugins show: missing NAME (see zcode-host plugins --help)\n";
        return kUsageError;
      }
      return show(reg, name, kind);
    }
    std::cerr << "zcode-host plugins: '" << action << "' is not one of list, show\n";
    return kUsageError;
  } catch (...) {
    return report_current_exception("plugins");
  }
}

}  // namespace zcode::host
