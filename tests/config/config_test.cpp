// HarnessConfig: loading, number/boolean scalars, every validation rule with
// its exact path and message, --set overrides, YAML/JSON equivalence, round
// trips, and plugin option schemas through a fake SchemaProvider.
//
// Expected messages are the documented wording (docs/config-reference.md);
// expected numbers are hand-derived from the YAML in each test.
#include <zcode/core/config.h>

#include "glm52_schema_provider.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace zcode {
// Readable gtest output for error lists.
void PrintTo(const ConfigError& e, std::ostream* os) { *os << '"' << e.str() << '"'; }
}  // namespace zcode

namespace {

using zcode::ConfigError;
using zcode::HarnessConfig;
using Lines = std::vector<std::string>;

const char* kBase = "data:\n  train_path: train.jsonl\n";

Lines errors_of(const std::string& yaml, const zcode::SchemaProvider* p = nullptr) {
  Lines out;
  for (const ConfigError& e : HarnessConfig::from_string(yaml, "test.yaml").check(p)) out.push_back(e.str());
  return out;
}

// kBase plus `extra` YAML.
Lines errs(const std::string& extra, const zcode::SchemaProvider* p = nullptr) {
  return errors_of(std::string(kBase) + extra, p);
}

HarnessConfig valid(const std::string& extra) {
  HarnessConfig c = HarnessConfig::from_string(std::string(kBase) + extra, "test.yaml");
  c.validate();
  return c;
}

rapidjson::Document parse(const std::string& json) {
  rapidjson::Document d;
  d.Parse(json.c_str());
  EXPECT_FALSE(d.HasParseError()) << json;
  return d;
}

std::string temp_file(const std::string& name, const std::string& text) {
  auto dir = std::filesystem::temp_directory_path() / ("zcode_config_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = dir / name;
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

// ---- loading -------------------------------------------------------------------

TEST(Load, MinimalConfigHasDocumentedDefaults) {
  HarnessConfig c = valid("");
  EXPECT_EQ(c.experiment_name(), "zcode_run");
  EXPECT_EQ(c.seed(), 42u);
  EXPECT_EQ(c.hardware().accelerator, "cpu");
  EXPECT_EQ(c.hardware().devices, 1);
  EXPECT_EQ(c.model().type, "glm52");
  EXPECT_EQ(c.model().max_seq_len, 1024);
  // variant, moe_experts, moe_top_k, d_model: the plugin's (Load.ModelDefaultsAreThePluginsOwn).
  EXPECT_EQ(c.data().loader, "jsonl");
  EXPECT_EQ(c.data().batch_size, 8);
  EXPECT_EQ(c.data().tokenizer, "hf://gpt2");
  EXPECT_TRUE(c.data().cross_document_attention);
  EXPECT_FALSE(c.data().mask_document_boundary);
  EXPECT_EQ(c.optimizer().name, "adamw");
  EXPECT_EQ(c.optimizer().lr, 3e-4);
  EXPECT_EQ(c.optimizer().betas[1], 0.999);
  EXPECT_EQ(c.scheduler().type, "cosine_with_warmup");
  EXPECT_EQ(c.training().max_steps, 1000);
  EXPECT_EQ(c.training().max_consecutive_nonfinite, 5);
  EXPECT_TRUE(c.training().eval_at_start);
  EXPECT_EQ(c.training().precision, "fp32");
  EXPECT_EQ(c.logging().output_dir, "outputs");
  EXPECT_EQ(c.profiling().active, 3);
  EXPECT_EQ(c.evaluation().plugins, (Lines{"lm"}));
  EXPECT_EQ(c.evaluation().batch_size, 8);  // = data.batch_size
  EXPECT_EQ(c.evaluation().max_batches, 0);
  EXPECT_EQ(c.generation().strategy, "greedy");
  ASSERT_EQ(c.callbacks().size(), 5u);
  EXPECT_EQ(c.callbacks()[0].type, "console");
  EXPECT_EQ(c.callbacks()[2].type, "metrics_jsonl");
  EXPECT_EQ(c.callbacks()[4].type, "model_card");
  EXPECT_EQ(c.callbacks()[1].options_json, "{\"type\":\"metrics_json\"}");
}

// One home per default: the struct initializers (config.h) are written into
// the built-in schema by the field table, and validation fills the schema's
// defaults and reads them back. A default-constructed section must equal the
// section a minimal config validates to, member for member (operator==), so
// a default that the schema, a reader or a canonical form changes fails here.
TEST(Defaults, StructInitializersAreTheSchemaDefaults) {
  const HarnessConfig fresh;  // every section at its initializers
  const HarnessConfig c = valid("");
  EXPECT_EQ(c.experiment_name(), fresh.experiment_name());
  EXPECT_EQ(c.seed(), fresh.seed());
  EXPECT_EQ(c.plugin_path(), fresh.plugin_path());
  EXPECT_EQ(c.hardware(), fresh.hardware());
  EXPECT_EQ(c.model(), fresh.model());
  zcode::DataConfig data = c.data();
  // What the minimal config writes, and what validation derives from the tokenizer.
  EXPECT_EQ(data.train_path, "train.jsonl");
  EXPECT_EQ(data.tokenizer_type, "bpe");
  EXPECT_EQ(data.tokenizer_options_json, "{\"path\":\"hf://gpt2\"}");
  data.train_path = fresh.data().train_path;
  data.tokenizer_type = fresh.data().tokenizer_type;
  data.tokenizer_options_json = fresh.data().tokenizer_options_json;
  EXPECT_EQ(data, fresh.data());
  EXPECT_EQ(c.optimizer(), fresh.optimizer());
  EXPECT_EQ(c.scheduler(), fresh.scheduler());
  EXPECT_EQ(c.training(), fresh.training());
  EXPECT_EQ(c.logging(), fresh.logging());
  EXPECT_EQ(c.profiling(), fresh.profiling());
  EXPECT_EQ(c.evaluation(), fresh.evaluation());  // batch_size: data.batch_size, also 8
  EXPECT_EQ(c.generation(), fresh.generation());
  EXPECT_EQ(c.model_card(), fresh.model_card());
}

// The schema's default of a typed field is the initializer's value itself.
TEST(Defaults, SchemaCarriesTheInitializers) {
  rapidjson::Document s = parse(HarnessConfig::builtin_schema_json());
  auto def = [&](const char* section, const char* key) -> const rapidjson::Value& {
    return s["properties"][section]["properties"][key]["default"];
  };
  EXPECT_EQ(def("training", "log_every").GetInt64(), zcode::TrainingConfig{}.log_every);
  EXPECT_EQ(def("optimizer", "lr").GetDouble(), zcode::OptimizerConfig{}.lr);
  EXPECT_EQ(def("optimizer", "betas")[1].GetDouble(), zcode::OptimizerConfig{}.betas[1]);
  EXPECT_STREQ(def("logging", "console_log_level").GetString(), "INFO");
  EXPECT_EQ(s["properties"]["seed"]["default"].GetUint64(), 42u);
  // Fields without a default: required, computed, or unset optionals.
  EXPECT_FALSE(s["properties"]["data"]["properties"]["train_path"].HasMember("default"));
  EXPECT_FALSE(s["properties"]["evaluation"]["properties"]["batch_size"].HasMember("default"));
  EXPECT_FALSE(s["properties"]["generation"]["properties"]["seed"].HasMember("default"));
  // Every field has one `default` at most (a typed row's schema text must not write its own).
  std::function<void(const rapidjson::Value&, const std::string&)> once = [&](const rapidjson::Value& v,
                                                                              const std::string& at) {
    if (!v.IsObject()) return;
    int defaults = 0;
    for (auto& m : v.GetObject()) {
      if (std::string(m.name.GetString()) == "default") ++defaults;
      once(m.value, at + "/" + m.name.GetString());
    }
    EXPECT_LE(defaults, 1) << at;
  };
  once(s, "");
}

// ---- callbacks: a list adds to the defaults -----------------------------------

Lines callback_options(const HarnessConfig& c) {
  Lines out;
  for (const auto& cb : c.callbacks()) out.push_back(cb.options_json);
  return out;
}

TEST(Callbacks, ListAddsToTheDefaults) {
  HarnessConfig c = valid("callbacks:\n  - {type: early_stopping, patience: 2}\n");
  EXPECT_EQ(callback_options(c), (Lines{R"({"type":"console"})", R"({"type":"metrics_json"})",
                                        R"({"type":"metrics_jsonl"})", R"({"type":"checkpoint"})",
                                        R"({"type":"model_card"})", R"({"type":"early_stopping","patience":2})"}));
}

TEST(Callbacks, DefaultTypeConfiguresThatOneInPlace) {
  HarnessConfig c = valid("callbacks:\n  - {type: debugger}\n  - {type: Checkpoint, every: 50}\n");
  EXPECT_EQ(callback_options(c),
            (Lines{R"({"type":"console"})", R"({"type":"metrics_json"})", R"({"type":"metrics_jsonl"})",
                   R"({"type":"Checkpoint","every":50})", R"({"type":"model_card"})", R"({"type":"debugger"})"}));
  EXPECT_EQ(c.callbacks()[3].type, "checkpoint");
}

TEST(Callbacks, EnabledFalseRemovesOneAndEnabledIsNotPassedOn) {
  HarnessConfig c = valid("callbacks:\n  - {type: console, enabled: false}\n  - {type: model_card, enabled: true}\n");
  EXPECT_EQ(callback_options(c), (Lines{R"({"type":"metrics_json"})", R"({"type":"metrics_jsonl"})",
                                        R"({"type":"checkpoint"})", R"({"type":"model_card"})"}));
}

TEST(Callbacks, ReplaceDefaultsKeepsTheListAsWritten) {
  HarnessConfig c = valid("callbacks_replace_defaults: true\ncallbacks:\n  - {type: metrics_json}\n");
  EXPECT_EQ(callback_options(c), (Lines{R"({"type":"metrics_json"})"}));
  // No list: the defaults, whatever the flag says.
  EXPECT_EQ(valid("callbacks_replace_defaults: true\n").callbacks().size(), 5u);
}

TEST(Callbacks, ResolvedListReadsBackUnchanged) {
  HarnessConfig c = valid("callbacks:\n  - {type: early_stopping}\n  - {type: console, enabled: false}\n");
  const Lines first = callback_options(c);
  ASSERT_EQ(first.size(), 5u);
  HarnessConfig again = HarnessConfig::from_string(c.to_yaml(), "config.yaml");
  again.validate();
  EXPECT_EQ(callback_options(again), first);
}

TEST(Callbacks, LoggingPrometheusAddsItsCallback) {
  // true: the callback with its own defaults, after the default set.
  HarnessConfig on = valid("logging:\n  prometheus: true\n");
  ASSERT_EQ(on.callbacks().size(), 6u);
  EXPECT_EQ(on.callbacks()[5].options_json, R"({"type":"prometheus"})");
  // An object: its members are the callback's options.
  HarnessConfig obj = valid("logging:\n  prometheus: {port: 9999, host: 0.0.0.0}\n");
  EXPECT_EQ(obj.callbacks().back().options_json, R"({"type":"prometheus","port":9999,"host":"0.0.0.0"})");
  // An entry of the same type configures it in place; its options win.
  HarnessConfig both =
      valid("logging:\n  prometheus: {port: 9999, linger_s: 2}\ncallbacks:\n  - {type: prometheus, port: 1234}\n");
  ASSERT_EQ(both.callbacks().size(), 6u);
  EXPECT_EQ(both.callbacks()[5].options_json, R"({"type":"prometheus","port":1234,"linger_s":2})");
  // ... or switches it off.
  EXPECT_EQ(
      valid("logging:\n  prometheus: true\ncallbacks:\n  - {type: prometheus, enabled: false}\n").callbacks().size(),
      5u);
  // false or absent: no callback; the resolved config reads back the same list.
  EXPECT_EQ(valid("logging:\n  prometheus: false\n").callbacks().size(), 5u);
  HarnessConfig again = HarnessConfig::from_string(both.to_yaml(), "config.yaml");
  again.validate();
  EXPECT_EQ(callback_options(again), callback_options(both));
}

TEST(Callbacks, LoggingSinksAddTheirCallbacks) {
  HarnessConfig on = valid("logging:\n  tensorboard: true\n  prometheus: true\n  mlflow: true\n");
  ASSERT_EQ(on.callbacks().size(), 8u);
  EXPECT_EQ(on.callbacks()[5].options_json, R"({"type":"mlflow"})");
  EXPECT_EQ(on.callbacks()[6].options_json, R"({"type":"tensorboard"})");
  EXPECT_EQ(on.callbacks()[7].options_json, R"({"type":"prometheus"})");
  HarnessConfig conf =
      valid("logging:\n  tensorboard: true\ncallbacks:\n  - {type: tensorboard, histogram_every: 0}\n");
  ASSERT_EQ(conf.callbacks().size(), 6u);
  EXPECT_EQ(conf.callbacks()[5].options_json, R"({"type":"tensorboard","histogram_every":0})");
  EXPECT_EQ(errs("logging:\n  tensorboard: {every: 2}\n"),
            (Lines{R"(logging.tensorboard: expected true or false, found a mapping {"every":2})"}));
}

TEST(Callbacks, LoggingPrometheusIsCheckedWhereItIsWritten) {
  EXPECT_EQ(errs("logging:\n  prometheus: yes please\n"),
            (Lines{"logging.prometheus: expected true or false or a mapping, found string 'yes please'"}));
  EXPECT_EQ(errs("logging:\n  prometheus: {port: 70000}\n"),
            (Lines{"logging.prometheus.port: expected an integer >= 0 and <= 65535, found 70000"}));
}

TEST(Callbacks, EnabledMustBeABoolean) {
  EXPECT_EQ(errs("callbacks:\n  - {type: console, enabled: 3}\n"),
            (Lines{"callbacks[0].enabled: expected true or false, found number 3"}));
}

// ---- the run folder's config.yaml: absolute paths ------------------------------

TEST(AbsolutePaths, RelativeFilePathsAreMadeAbsoluteAndSchemesKept) {
  HarnessConfig c = HarnessConfig::from_string(
      "plugin_path: [plug, /opt/p]\ndata:\n  train_path: data/../data/train.jsonl\n  val_path: /abs/val.jsonl\n"
      "  cache_dir: .cache/t\n  tokenizer: hf://gpt2\nlogging:\n  output_dir: out\n"
      "model_card:\n  template: card.mustache\n",
      "p.yaml");
  c.validate();
  HarnessConfig back = HarnessConfig::from_string(c.to_yaml_absolute_paths("/work/x"), "config.yaml");
  back.validate();
  EXPECT_EQ(back.plugin_path(), (Lines{"/work/x/plug", "/opt/p"}));
  EXPECT_EQ(back.data().train_path, "/work/x/data/train.jsonl");
  EXPECT_EQ(back.data().val_path.value_or(""), "/abs/val.jsonl");
  EXPECT_EQ(back.data().cache_dir.value_or(""), "/work/x/.cache/t");
  EXPECT_EQ(back.data().tokenizer, "hf://gpt2");
  EXPECT_EQ(back.logging().output_dir, "/work/x/out");
  EXPECT_EQ(back.model_card().template_path.value_or(""), "/work/x/card.mustache");
  // The config itself is unchanged (plugins and state.json see it as written).
  EXPECT_EQ(c.data().train_path, "data/../data/train.jsonl");
  // The tokenizer's object form, a relative file.
  HarnessConfig t = valid("  tokenizer: {type: bpe, path: assets/gpt2}\n");
  HarnessConfig tb = HarnessConfig::from_string(t.to_yaml_absolute_paths("/b"), "config.yaml");
  tb.validate();
  EXPECT_EQ(tb.data().tokenizer, "/b/assets/gpt2");
  EXPECT_TRUE(HarnessConfig::is_path_field("data.tokenizer.path"));
  EXPECT_FALSE(HarnessConfig::is_path_field("data.text_field"));
}

TEST(Load, NumbersInYamlAreNumbers) {
  HarnessConfig c = valid(
      "  val_fraction: .5\noptimizer:\n  lr: 3e-4\n  weight_decay: 1e-3\n  eps: 5e-4\n"
      "scheduler:\n  min_lr_ratio: 1E-1\n");
  EXPECT_EQ(c.optimizer().lr, 0.0003);
  EXPECT_EQ(c.optimizer().weight_decay, 0.001);
  EXPECT_EQ(c.optimizer().eps, 0.0005);
  EXPECT_EQ(c.data().val_fraction, 0.5);
  EXPECT_EQ(c.scheduler().min_lr_ratio, 0.1);
}

TEST(Load, IntegerForms) {
  HarnessConfig c = valid("seed: 0x10\ntraining:\n  max_steps: +20\n  log_every: 0o17\n");
  EXPECT_EQ(c.seed(), 16u);
  EXPECT_EQ(c.training().max_steps, 20);
  EXPECT_EQ(c.training().log_every, 15);
}

TEST(Load, IntegerFieldRejectsFraction) {
  EXPECT_EQ(errs("  batch_size: 2.5\n"), (Lines{"data.batch_size: expected an integer, found number 2.5"}));
  EXPECT_EQ(errs("training:\n  max_steps: 1e5\n"),
            (Lines{"training.max_steps: expected an integer, found number 1e+05"}));
}

TEST(Load, Yaml11BooleansRejectedWhereStringExpected) {
  EXPECT_EQ(errs("logging:\n  console_log_level: off\n"),
            (Lines{"logging.console_log_level: found boolean-like YAML 1.1 value 'off'; quote it if you mean "
                   "the string"}));
  EXPECT_EQ(errs("experiment_name: yes\n"),
            (Lines{"experiment_name: found boolean-like YAML 1.1 value 'yes'; quote it if you mean the string"}));
  // Quoted, it is the string 'off', which is not a level.
  EXPECT_EQ(errs("logging:\n  console_log_level: \"off\"\n"),
            (Lines{"logging.console_log_level: 'off' is not one of TRACE, DEBUG, INFO, WARNING, ERROR"}));
}

TEST(Load, BooleanFieldsAcceptOnlyTrueFalse) {
  EXPECT_EQ(errs("logging:\n  wandb: no\n"),
            (Lines{"logging.wandb: expected true or false, found boolean-like YAML 1.1 value 'no'"}));
  EXPECT_EQ(errs("training:\n  deterministic: On\n"),
            (Lines{"training.deterministic: expected true or false, found boolean-like YAML 1.1 value 'On'"}));
  EXPECT_EQ(errs("training:\n  deterministic: \"true\"\n"),
            (Lines{"training.deterministic: expected true or false, found string 'true'"}));
  EXPECT_EQ(errs("training:\n  deterministic: 1\n"),
            (Lines{"training.deterministic: expected true or false, found number 1"}));
  EXPECT_TRUE(valid("training:\n  deterministic: True\n").training().deterministic);
  EXPECT_FALSE(valid("training:\n  eval_at_start: false\n").training().eval_at_start);
  EXPECT_EQ(errs("training:\n  eval_at_start: 0\n"),
            (Lines{"training.eval_at_start: expected true or false, found number 0"}));
  // In a plugin-owned key with no schema, the flag still stands.
  EXPECT_EQ(errs("optimizer:\n  foo: y\n"),
            (Lines{"optimizer.foo: found boolean-like YAML 1.1 value 'y'; quote it if you mean the string"}));
}

TEST(Load, YamlSyntaxErrorHasFileLineColumn) {
  try {
    HarnessConfig::from_string("data:\n  train_path: [a, b\n", "bad.yaml");
    FAIL() << "no error";
  } catch (const zcode::ConfigLoadError& e) {
    EXPECT_TRUE(std::string(e.what()).starts_with("bad.yaml:3:1: ")) << e.what();
  }
}

TEST(Load, JsonSyntaxErrorHasFileLineColumn) {
  const std::string path = temp_file("bad.json", "{\n  \"data\": {\"train_path\": \"x\",}\n}\n");
  try {
    HarnessConfig::from_file(path);
    FAIL() << "no error";
  } catch (const zcode::ConfigLoadError& e) {
    // Line 2 is `  "data": {"train_path": "x",}`: the '}' after the stray ','
    // is character 30.
    EXPECT_EQ(std::string(e.what()), path + ":2:30: Missing a name for object member.");
  }
}

TEST(Load, DuplicateKeysAreErrors) {
  try {
    HarnessConfig::from_string("optimizer:\n  lr: 1\n  lr: 2\n", "dup.yaml");
    FAIL() << "no error";
  } catch (const zcode::ConfigLoadError& e) {
    EXPECT_EQ(std::string(e.what()), "dup.yaml:3:3: duplicate key 'optimizer.lr' (a later value would silently win)");
  }
  EXPECT_THROW(HarnessConfig::from_string("{\"seed\": 1, \"seed\": 2}", "dup.json"), zcode::ConfigLoadError);
}

TEST(Load, MissingFileAndNonMappingTop) {
  try {
    HarnessConfig::from_yaml("/nonexistent/zcode.yaml");
    FAIL();
  } catch (const zcode::ConfigLoadError& e) {
    EXPECT_EQ(std::string(e.what()), "/nonexistent/zcode.yaml: file not found or not readable");
  }
  try {
    HarnessConfig::from_string("- a\n- b\n", "list.yaml");
    FAIL();
  } catch (const zcode::ConfigLoadError& e) {
    EXPECT_EQ(std::string(e.what()),
              "list.yaml: expected a mapping of config sections at the top level, found a list [\"a\",\"b\"]");
  }
}

TEST(Load, YamlAndJsonAreEquivalent) {
  const std::string yaml =
      "experiment_name: eq\nseed: 7\nmodel:\n  type: GLM5pt2\n  moe_experts: 4\n  moe_top_k: 2\n"
      "data:\n  train_path: t.jsonl\n  tokenizer: {type: bpe, path: hf://gpt2}\n"
      "optimizer:\n  name: AdamW\n  lr: 1.5e-4\n  betas: [0.9, 0.95]\n"
      "callbacks:\n  - type: console\n  - {type: checkpoint, every: 3}\n";
  const std::string json =
      R"({"experiment_name":"eq","seed":7,"model":{"type":"GLM5pt2","moe_experts":4,"moe_top_k":2},)"
      R"("data":{"train_path":"t.jsonl","tokenizer":{"type":"bpe","path":"hf://gpt2"}},)"
      R"("optimizer":{"name":"AdamW","lr":1.5e-4,"betas":[0.9,0.95]},)"
      R"("callbacks":[{"type":"console"},{"type":"checkpoint","every":3}]})";
  HarnessConfig a = HarnessConfig::from_yaml(temp_file("eq.yaml", yaml));
  HarnessConfig b = HarnessConfig::from_json(temp_file("eq.json", json));
  HarnessConfig c = HarnessConfig::from_file(temp_file("eq.conf", json));  // by content
  a.validate();
  b.validate();
  c.validate();
  EXPECT_EQ(parse(a.to_json()), parse(b.to_json()));
  EXPECT_EQ(a.to_json(), b.to_json());
  EXPECT_EQ(b.to_json(), c.to_json());
}

TEST(Load, RoundTripThroughYaml) {
  // Strings that look like other scalars must come back as strings.
  HarnessConfig a = valid(
      "  text_field: \"off\"\n  cache_dir: \"123\"\nexperiment_name: \"true\"\noptimizer:\n  lr: 3e-4\n"
      "  note: \"3e-4\"\n  empty: \"\"\n  nested: {a: [1, 2.5, null], b: \"null\"}\n"
      "generation:\n  stop: [\"\\n\\n\", \"yes\"]\n");
  a.apply_overrides({"training.max_steps=77"});
  a.validate();
  const std::string yaml = a.to_yaml();
  HarnessConfig b = HarnessConfig::from_string(yaml, "roundtrip.yaml");
  b.validate();
  EXPECT_EQ(a.to_json(), b.to_json()) << yaml;
  EXPECT_EQ(b.overrides(), (Lines{"training.max_steps=77"}));
  EXPECT_EQ(b.data().text_field, "off");
  EXPECT_EQ(b.optimizer().lr, 3e-4);
  EXPECT_EQ(b.generation().stop, (Lines{"\n\n", "yes"}));
}

TEST(Load, RoundTripKeepsControlCharactersAndEdgeSpaces) {
  // Found by config_fuzz: yaml-cpp wrote "gpt2\r\r\r\r" as a plain scalar
  // and read it back with one CR fewer, because a key followed it.
  HarnessConfig a = valid("  extra: \"hf://gpt2\\r\\r\\r\\r\"\n  more: \" lead\\ttab\\x01 trail \"\n");
  a.validate();
  const std::string yaml = a.to_yaml();
  HarnessConfig b = HarnessConfig::from_string(yaml, "roundtrip.yaml");
  b.validate();
  EXPECT_EQ(a.to_json(), b.to_json()) << yaml;
  EXPECT_NE(yaml.find("\"hf://gpt2\\r\\r\\r\\r\""), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("\" lead\\ttab\\x01 trail \""), std::string::npos) << yaml;
  EXPECT_NE(b.to_json().find("\"extra\":\"hf://gpt2\\r\\r\\r\\r\""), std::string::npos) << b.to_json();
}

TEST(Load, CopyIsDeep) {
  HarnessConfig a = valid("");
  HarnessConfig b = a;
  b.apply_overrides({"seed=9"});
  b.validate();
  EXPECT_EQ(a.seed(), 42u);
  EXPECT_EQ(b.seed(), 9u);
}

// ---- one failing config per rule -------------------------------------------------

TEST(Validate, TypeErrors) {
  EXPECT_EQ(errs("optimizer:\n  lr: fast\n"), (Lines{"optimizer.lr: expected a number, found string 'fast'"}));
  EXPECT_EQ(errs("hardware: 3\n"), (Lines{"hardware: expected a mapping, found number 3"}));
  EXPECT_EQ(errs("optimizer:\n  betas: 0.9\n"), (Lines{"optimizer.betas: expected a list, found number 0.9"}));
  EXPECT_EQ(errs("callbacks:\n  - console\n"), (Lines{"callbacks[0]: expected a mapping, found string 'console'"}));
  EXPECT_EQ(errs("plugin_path: 5\n"), (Lines{"plugin_path: expected a string or a list, found number 5"}));
}

TEST(Validate, Enums) {
  const config_test::Glm52SchemaProvider glm52;  // model.variant is the plugin's
  EXPECT_EQ(errs("model:\n  variant: tinyy\n", &glm52),
            (Lines{"model.variant: 'tinyy' is not one of nano, tiny, base, large, xl (did you mean 'tiny'?)"}));
  EXPECT_EQ(errs("hardware:\n  accelerator: tpu\n"),
            (Lines{"hardware.accelerator: 'tpu' is not one of cpu, gpu (did you mean 'cpu'?)"}));
  EXPECT_EQ(errs("training:\n  precision: fp64\n"),
            (Lines{"training.precision: 'fp64' is not one of fp32, fp16, bf16, fp8 (did you mean 'fp32'?)"}));
  EXPECT_EQ(errs("  on_bad_record: ignore\n"), (Lines{"data.on_bad_record: 'ignore' is not one of error, skip"}));
  EXPECT_EQ(errs("generation:\n  strategy: 3\n"), (Lines{"generation.strategy: expected a string, found number 3"}));
}

TEST(Validate, LogLevelIsCaseInsensitiveWithWarnAlias) {
  EXPECT_EQ(valid("logging:\n  console_log_level: debug\n").logging().console_log_level, ZC_LOG_DEBUG);
  EXPECT_EQ(valid("logging:\n  console_log_level: WARN\n").logging().console_log_level, ZC_LOG_WARN);
  EXPECT_EQ(valid("logging:\n  console_log_level: Warning\n").logging().console_log_level, ZC_LOG_WARN);
  EXPECT_EQ(valid("logging:\n  console_log_level: trace\n").logging().console_log_level, ZC_LOG_TRACE);
  EXPECT_EQ(errs("logging:\n  console_log_level: verbose\n"),
            (Lines{"logging.console_log_level: 'verbose' is not one of TRACE, DEBUG, INFO, WARNING, ERROR"}));
}

TEST(Validate, Ranges) {
  EXPECT_EQ(errs("optimizer:\n  lr: 0\n"), (Lines{"optimizer.lr: expected a number > 0, found 0"}));
  EXPECT_EQ(errs("optimizer:\n  lr: -1e-3\n"), (Lines{"optimizer.lr: expected a number > 0, found -0.001"}));
  EXPECT_EQ(errs("  batch_size: 0\n"), (Lines{"data.batch_size: expected an integer >= 1, found 0"}));
  EXPECT_EQ(errs("  val_fraction: 1\n"), (Lines{"data.val_fraction: expected a number >= 0 and < 1, found 1"}));
  EXPECT_EQ(errs("  val_fraction: -0.1\n"), (Lines{"data.val_fraction: expected a number >= 0 and < 1, found -0.1"}));
  EXPECT_EQ(errs("optimizer:\n  betas: [0.9, 1.0]\n"),
            (Lines{"optimizer.betas[1]: expected a number >= 0 and < 1, found 1"}));
  EXPECT_EQ(errs("optimizer:\n  betas: [0.9, 0.95, 0.99]\n"),
            (Lines{"optimizer.betas: expected a list of exactly 2 items, found 3 items"}));
  EXPECT_EQ(errs("training:\n  eval_every: 0\n"), (Lines{"training.eval_every: expected an integer >= 1, found 0"}));
  EXPECT_EQ(errs("training:\n  save_every: 0\n"), (Lines{"training.save_every: expected an integer >= 1, found 0"}));
  EXPECT_EQ(errs("evaluation:\n  max_batches: -1\n"),
            (Lines{"evaluation.max_batches: expected an integer >= 0, found -1"}));
  EXPECT_EQ(valid("evaluation:\n  max_batches: 16\n").evaluation().max_batches, 16);
  EXPECT_EQ(errs("training:\n  max_consecutive_nonfinite: 0\n"),
            (Lines{"training.max_consecutive_nonfinite: expected an integer >= 1, found 0"}));
  EXPECT_EQ(errs("generation:\n  top_p: 0\n"), (Lines{"generation.top_p: expected a number > 0 and <= 1, found 0"}));
  EXPECT_EQ(errs("seed: -1\n"), (Lines{"seed: expected an integer >= 0 and <= 18446744073709551615, found -1"}));
  EXPECT_EQ(errs("  text_field: \"\"\n"), (Lines{"data.text_field: expected a non-empty string, found string ''"}));
}

TEST(Validate, PatternWithOwnWording) {
  EXPECT_EQ(errs("experiment_name: ../escape\n"),
            (Lines{"experiment_name: expected a name of letters, digits, '.', '_' or '-' (it names the run "
                   "folder), found string '../escape'"}));
  EXPECT_EQ(errs("profiling:\n  schedule: wait=1,sleep=2\n"),
            (Lines{"profiling.schedule: expected comma-separated wait=N,warmup=N,active=N,repeat=N, found "
                   "string 'wait=1,sleep=2'"}));
}

TEST(Validate, UnknownKeysWithHints) {
  EXPECT_EQ(errs("training:\n  max_step: 10\n"), (Lines{"training.max_step: unknown key (did you mean 'max_steps'?)"}));
  EXPECT_EQ(errs("optimzer:\n  lr: 1\n"), (Lines{"optimzer: unknown key (did you mean 'optimizer'?)"}));
  EXPECT_EQ(errs("training:\n  lr: 1\n"), (Lines{"training.lr: unknown key (did you mean 'optimizer.lr'?)"}));
  EXPECT_EQ(errs("generation:\n  contrastive: true\n"),
            (Lines{"generation.contrastive: unknown key (use generation.strategy: contrastive)"}));
  EXPECT_EQ(errs("model_card:\n  tmpl: x\n"), (Lines{"model_card.tmpl: unknown key; known keys: template"}));
  // Plugin-owned sections keep their extra keys for the plugin.
  HarnessConfig c = valid("optimizer:\n  name: sophia\n  rho: 0.04\nmodel:\n  d_model: 64\n");
  EXPECT_EQ(parse(c.section_json("optimizer"))["rho"].GetDouble(), 0.04);
  EXPECT_EQ(parse(c.section_json("model"))["d_model"].GetInt(), 64);
}

// Each evaluator gets the shared keys of `evaluation` and its own subsection,
// never another listed evaluator's (so lm's schema, which refuses unknown
// keys, accepts a config that configures the generation evaluator).
TEST(Validate, EachEvaluatorSeesItsOwnSubsection) {
  HarnessConfig c = valid(
      "evaluation:\n  plugins: [lm, generation]\n  split: val\n  generation: {max_documents: 3}\n"
      "  lm: {x: 1}\n");
  const auto lm = parse(c.evaluator_options_json("lm"));
  EXPECT_TRUE(lm.HasMember("lm") && lm.HasMember("split") && lm.HasMember("plugins"));
  EXPECT_FALSE(lm.HasMember("generation"));
  const auto g = parse(c.evaluator_options_json("generation"));
  EXPECT_EQ(g["generation"]["max_documents"].GetInt(), 3);
  EXPECT_FALSE(g.HasMember("lm"));
  EXPECT_EQ(std::string(g["split"].GetString()), "val");
}

TEST(Validate, MissingRequired) {
  EXPECT_EQ(errors_of("seed: 1\n"), (Lines{"data: missing required key"}));
  EXPECT_EQ(errors_of("data:\n  batch_size: 4\n"), (Lines{"data.train_path: missing required key"}));
  EXPECT_EQ(errs("callbacks:\n  - every: 2\n"), (Lines{"callbacks[0].type: missing required key"}));
}

TEST(Validate, CrossFieldRules) {
  // moe_top_k <= moe_experts, n_kv_heads | n_heads, first_dense_layers <=
  // n_layers are the model plugin's rules: tests/model/plugin_test.cpp
  // (Glm52Plugin.ModelRulesMovedFromTheHost).
  EXPECT_EQ(errs("scheduler:\n  warmup_steps: 2000\ntraining:\n  max_steps: 500\n"),
            (Lines{"scheduler.warmup_steps: 2000 exceeds training.max_steps (500)"}));
  EXPECT_EQ(errs("scheduler:\n  type: wsd\n  warmup_steps: 10\n  stable_steps: 80\n  decay_steps: 20\n"
                 "training:\n  max_steps: 100\n"),
            (Lines{"scheduler.decay_steps: warmup_steps + stable_steps + decay_steps = 110 exceeds "
                   "training.max_steps (100)"}));
  EXPECT_EQ(errs("scheduler:\n  type: WSD\n  warmup_steps: 10\n  stable_steps: 95\ntraining:\n  max_steps: 100\n"),
            (Lines{"scheduler.stable_steps: warmup_steps + stable_steps = 105 exceeds training.max_steps (100)"}));
  EXPECT_EQ(errs("model:\n  max_seq_len: 1000\ntraining:\n  sp_group_size: 3\n"),
            (Lines{"training.sp_group_size: 3 does not divide model.max_seq_len (1000)",
                   "training.sp_group_size: 3 has no effect unless training.sequence_parallel is true"}));
  EXPECT_EQ(errs("model:\n  d_model: 100\ntraining:\n  tp_group_size: 8\n"),
            (Lines{"training.tp_group_size: 8 does not divide model.d_model (100)",
                   "training.tp_group_size: 8 has no effect unless training.tensor_parallel is true"}));
  EXPECT_EQ(errs("  val_path: v.jsonl\n  val_fraction: 0.1\n"),
            (Lines{"data.val_fraction: 0.1 cannot be combined with data.val_path; use one of them"}));
  EXPECT_EQ(errs("generation:\n  strategy: beam\n"),
            (Lines{"generation.num_beams: strategy 'beam' needs num_beams >= 2, found 1"}));
  EXPECT_EQ(errs("generation:\n  num_beams: 4\n"),
            (Lines{"generation.num_beams: 4 has no effect unless generation.strategy is 'beam'"}));
  EXPECT_EQ(errs("generation:\n  strategy: contrastive\n"),
            (Lines{"generation.penalty_alpha: strategy 'contrastive' needs penalty_alpha > 0, found 0",
                   "generation.top_k: strategy 'contrastive' needs top_k >= 2, found 0"}));
  EXPECT_EQ(errs("generation:\n  penalty_alpha: 0.6\n"),
            (Lines{"generation.penalty_alpha: 0.6 has no effect unless generation.strategy is 'contrastive'"}));
}

TEST(Validate, WsdDecayDefaultsToTheRest) {
  HarnessConfig c =
      valid("scheduler:\n  type: wsd\n  warmup_steps: 10\n  stable_steps: 60\ntraining:\n  max_steps: 100\n");
  EXPECT_EQ(c.scheduler().decay_steps, 30);
  EXPECT_EQ(parse(c.section_json("scheduler"))["decay_steps"].GetInt(), 30);
}

TEST(Validate, NotImplementedOptionsAreErrors) {
  EXPECT_EQ(errs("hardware:\n  accelerator: gpu\n"),
            (Lines{"hardware.accelerator: 'gpu' needs the CUDA backend, which is not implemented yet; use cpu"}));
  // Several devices are data-parallel processes now (core/src/dist); the
  // parts of multi-process training still to come are refused by name.
  EXPECT_EQ(errs("hardware:\n  devices: 2\n"), Lines{});
  EXPECT_EQ(errs("distributed:\n  backend: nccl\n"),
            (Lines{"distributed.backend: 'nccl' needs the CUDA backend, which is not implemented yet; use mpi (or "
                   "auto)"}));
  EXPECT_EQ(errs("distributed:\n  zero_stage: 1\n"), Lines{});  // ZeRO-1 (core/src/dist)
  // Expert parallelism: K divides the world; what needs every expert in one
  // process (decoding) is refused by name.
  EXPECT_EQ(errs("hardware:\n  devices: 4\ndistributed:\n  expert_parallel: 2\n"), Lines{});
  EXPECT_EQ(errs("hardware:\n  devices: 3\ndistributed:\n  expert_parallel: 2\n"),
            (Lines{"distributed.expert_parallel: 2 does not divide hardware.devices (3): each group of K ranks splits "
                   "the experts K ways, so the world size must be a multiple of K"}));
  // ZeRO-1 combines with it (ABI 1.9: dense parts over DATA, experts' over EXPERT_DATA).
  EXPECT_EQ(errs("hardware:\n  devices: 2\ndistributed:\n  expert_parallel: 2\n  zero_stage: 1\n"), Lines{});
  EXPECT_EQ(errs("hardware:\n  devices: 2\ndistributed:\n  expert_parallel: 2\ncallbacks:\n  - type: samples\n"),
            (Lines{"callbacks[0].type: 'samples' generates text, which needs every expert in one process, but "
                   "distributed.expert_parallel = 2 splits them over ranks; remove it or set callbacks[0].enabled: "
                   "false (generate from the checkpoint afterwards: zcode-host generate --checkpoint ...)"}));
  EXPECT_EQ(errs("training:\n  precision: bf16\n"),
            (Lines{"training.precision: 'bf16' needs the CUDA backend, which is not implemented yet; use fp32"}));
  EXPECT_EQ(errs("logging:\n  wandb: true\n  tensorboard: true\n"),
            (Lines{"logging.wandb: true needs the Weights & Biases sink, which is not implemented yet; set false"}));
  EXPECT_EQ(errs("profiling:\n  trace_handler: tensorboard\n"), Lines{});
  EXPECT_EQ(errs("profiling:\n  trace_handler: perfetto\n"),
            (Lines{"profiling.trace_handler: 'perfetto' is not one of disk, tensorboard"}));
  // The defaults themselves are all implemented.
  EXPECT_EQ(errs("training:\n  loss_scale: 1\n  precision: fp32\n"), Lines{});
}

TEST(Validate, EveryErrorCollectedInDocumentOrder) {
  const std::string yaml =
      "logging:\n  console_log_level: loud\n"
      "optimizer:\n  lr: fast\n  betas: [2, 0.5]\n"
      "data:\n  batch_size: 0\n";
  HarnessConfig c = HarnessConfig::from_string(yaml, "many.yaml");
  try {
    c.validate();
    FAIL() << "validate() accepted an invalid config";
  } catch (const zcode::ConfigValidationError& e) {
    const std::vector<ConfigError> want = {
        {"logging.console_log_level", "'loud' is not one of TRACE, DEBUG, INFO, WARNING, ERROR"},
        {"optimizer.lr", "expected a number, found string 'fast'"},
        {"optimizer.betas[0]", "expected a number >= 0 and < 1, found 2"},
        {"data.batch_size", "expected an integer >= 1, found 0"},
        {"data.train_path", "missing required key"}};
    EXPECT_EQ(e.errors(), want);
    EXPECT_EQ(std::string(e.what()),
              "many.yaml: 5 config errors\n"
              "  logging.console_log_level: 'loud' is not one of TRACE, DEBUG, INFO, WARNING, ERROR\n"
              "  optimizer.lr: expected a number, found string 'fast'\n"
              "  optimizer.betas[0]: expected a number >= 0 and < 1, found 2\n"
              "  data.batch_size: expected an integer >= 1, found 0\n"
              "  data.train_path: missing required key");
  }
  EXPECT_FALSE(c.validated());
}

// ---- --set ------------------------------------------------------------------------

TEST(Overrides, AppliedBeforeValidationAndRecorded) {
  HarnessConfig c = HarnessConfig::from_string("data:\n  train_path: t.jsonl\n  batch_size: 0\n", "o.yaml");
  EXPECT_EQ(c.check().size(), 1u);
  c.apply_overrides({"data.batch_size=4", "optimizer.betas=[0.9,0.95]", "optimizer.lr=1e-3", "model.type=GLM5pt2",
                     "callbacks[0].type=console", "callbacks.0.every=5"});
  c.validate();
  EXPECT_EQ(c.data().batch_size, 4);
  EXPECT_EQ(c.optimizer().betas[0], 0.9);
  EXPECT_EQ(c.optimizer().betas[1], 0.95);
  EXPECT_EQ(c.optimizer().lr, 1e-3);
  // A callbacks list adds to the defaults (issue 17): the console entry
  // configures the default console in its place, the other four stay.
  ASSERT_EQ(c.callbacks().size(), 5u);
  EXPECT_EQ(c.callbacks()[0].options_json, "{\"type\":\"console\",\"every\":5}");
  const Lines recorded{"data.batch_size=4",  "optimizer.betas=[0.9,0.95]", "optimizer.lr=1e-3",
                       "model.type=GLM5pt2", "callbacks[0].type=console",  "callbacks.0.every=5"};
  EXPECT_EQ(c.overrides(), recorded);
  auto doc = parse(c.to_json());
  ASSERT_TRUE(doc["overrides"].IsArray());
  ASSERT_EQ(doc["overrides"].Size(), 6u);
  EXPECT_STREQ(doc["overrides"][1].GetString(), "optimizer.betas=[0.9,0.95]");
}

TEST(Overrides, ValuesAreValidatedLikeTheFile) {
  HarnessConfig c = HarnessConfig::from_string(kBase, "o.yaml");
  c.apply_overrides({"logging.console_log_level=off", "optimizer.lr=fast"});
  // Document order: the --set created `logging` before `optimizer`.
  EXPECT_EQ(c.check(),
            (std::vector<ConfigError>{{"logging.console_log_level",
                                       "found boolean-like YAML 1.1 value 'off'; quote it if you mean the string"},
                                      {"optimizer.lr", "expected a number, found string 'fast'"}}));
  c.apply_overrides({"logging.console_log_level='off'", "optimizer.lr=2e-4"});
  EXPECT_EQ(c.check(), (std::vector<ConfigError>{
                           {"logging.console_log_level", "'off' is not one of TRACE, DEBUG, INFO, WARNING, ERROR"}}));
}

TEST(Overrides, BadEntriesAreAllReportedAndNothingIsApplied) {
  HarnessConfig c = HarnessConfig::from_string(kBase, "o.yaml");
  try {
    c.apply_overrides({"seed=5", "optimzer.lr=1", "training.max_step=3", "novalue", "seed.x=1", "optimizer.betas=[0.9",
                       "callbacks[7].type=x"});
    FAIL() << "accepted";
  } catch (const zcode::ConfigValidationError& e) {
    ASSERT_EQ(e.errors().size(), 6u) << e.what();
    EXPECT_EQ(e.errors()[0].str(), "optimzer.lr: --set: unknown config key 'optimzer' (did you mean 'optimizer'?)");
    EXPECT_EQ(e.errors()[1].str(),
              "training.max_step: --set: unknown key 'max_step' in section 'training' (did you mean 'max_steps'?)");
    EXPECT_EQ(e.errors()[2].str(), "--set 'novalue': expected PATH=VALUE, e.g. optimizer.lr=1e-3");
    // Entries apply in order: "seed=5" came first.
    EXPECT_EQ(e.errors()[3].str(), "seed.x: --set: cannot set it: 'seed' is number 5, not a mapping");
    EXPECT_TRUE(e.errors()[4].str().starts_with("optimizer.betas: --set: cannot parse the value '[0.9': "))
        << e.errors()[4].str();
    EXPECT_EQ(e.errors()[5].str(),
              "callbacks[7].type: --set: cannot set it: index 7 is out of range ('callbacks' has 0 items)");
  }
  EXPECT_TRUE(c.overrides().empty());
  c.validate();
  EXPECT_EQ(c.seed(), 42u);  // "seed=5" was valid but the batch was refused as a whole
}

// ---- plugin schemas through a SchemaProvider -------------------------------------

class FakeProvider : public zcode::SchemaProvider {
 public:
  std::map<std::pair<zc_kind, std::string>, std::string> schemas;
  std::optional<std::string> options_schema(zc_kind kind, std::string_view name) const override {
    auto it = schemas.find({kind, std::string(name)});
    if (it == schemas.end()) return std::nullopt;
    return it->second;
  }
  std::vector<std::string> component_names(zc_kind kind) const override {
    std::vector<std::string> out;
    for (auto& [k, v] : schemas)
      if (k.first == kind) out.push_back(k.second);
    return out;
  }
};

FakeProvider standard_provider() {
  FakeProvider p;
  p.schemas[{ZC_KIND_TOKENIZER, "bpe"}] =
      R"({"type":"object","additionalProperties":false,"properties":{"type":{"type":"string"},)"
      R"("path":{"type":"string"},"allowed_special":{"type":"array","items":{"type":"string"},"default":[]}}})";
  p.schemas[{ZC_KIND_DATALOADER, "jsonl"}] =
      R"({"type":"object","additionalProperties":false,"properties":{"train_path":{"type":"string"},)"
      R"("val_path":{"type":"string"},"tokenizer":{},"loader":{"type":"string"},)"
      R"("batch_size":{"type":"integer","minimum":1,"default":8},"streaming":{"type":"boolean","default":false}}})";
  p.schemas[{ZC_KIND_MODEL, "glm52"}] =
      R"({"type":"object","additionalProperties":false,"properties":{"type":{"type":"string"},)"
      R"("variant":{"type":"string"},"moe_experts":{"type":"integer"},"moe_top_k":{"type":"integer"},)"
      R"("max_seq_len":{"type":"integer"},"d_model":{"type":"integer","minimum":8},)"
      R"("norm":{"enum":["scalenorm","rmsnorm"],"default":"scalenorm"}}})";
  const char* adam =
      R"({"type":"object","additionalProperties":false,"properties":{"name":{"type":"string"},)"
      R"("lr":{"type":"number","exclusiveMinimum":0},"weight_decay":{"type":"number"},)"
      R"("betas":{"type":"array"},"eps":{"type":"number"},"decay_embeddings":{"type":"boolean","default":false}}})";
  p.schemas[{ZC_KIND_OPTIMIZER, "adamw"}] = adam;
  p.schemas[{ZC_KIND_OPTIMIZER, "sophia"}] =
      R"({"type":"object","additionalProperties":false,"properties":{"name":{"type":"string"},)"
      R"("lr":{"type":"number"},"betas":{"type":"array"},"weight_decay":{"type":"number"},)"
      R"("rho":{"type":"number","exclusiveMinimum":0,"default":0.04},)"
      R"("hessian_update_interval":{"type":"integer","minimum":1,"default":10}}})";
  p.schemas[{ZC_KIND_SCHEDULER, "cosine_with_warmup"}] =
      R"({"type":"object","additionalProperties":false,"properties":{"type":{"type":"string"},)"
      R"("warmup_steps":{"type":"integer"},"min_lr_ratio":{"type":"number"}}})";
  p.schemas[{ZC_KIND_SCHEDULER, "wsd"}] =
      R"({"type":"object","additionalProperties":false,"properties":{"type":{"type":"string"},)"
      R"("warmup_steps":{"type":"integer"},"stable_steps":{"type":"integer"},"decay_steps":{"type":"integer"},)"
      R"("decay_shape":{"enum":["linear","cosine","1-sqrt"],"default":"linear"}}})";
  p.schemas[{ZC_KIND_EVALUATOR, "lm"}] =
      R"({"type":"object","additionalProperties":false,"properties":{"plugins":{},"split":{"type":"string"},)"
      R"("batch_size":{"type":"integer"},"max_batches":{"type":"integer","minimum":0}}})";
  for (const char* cb : {"console", "metrics_json", "metrics_jsonl", "checkpoint", "model_card"})
    p.schemas[{ZC_KIND_CALLBACK, cb}] =
        R"({"type":"object","additionalProperties":false,"properties":{"type":{"type":"string"},)"
        R"("every":{"type":"integer","minimum":1}}})";
  return p;
}

TEST(PluginSchemas, ValidConfigPassesAndPluginDefaultsAreFilled) {
  FakeProvider p = standard_provider();
  HarnessConfig c = HarnessConfig::from_string(
      std::string(kBase) + "optimizer:\n  name: Sophia\n  lr: 1.5e-4\n  rho: 0.05\n", "p.yaml");
  ASSERT_EQ(c.check(&p), std::vector<ConfigError>{});
  c.validate(&p);
  auto opt = parse(c.section_json("optimizer"));
  EXPECT_EQ(opt["rho"].GetDouble(), 0.05);
  EXPECT_EQ(opt["hessian_update_interval"].GetInt(), 10);  // the plugin's default
  EXPECT_EQ(opt["weight_decay"].GetDouble(), 0.01);        // base default the plugin declares
  EXPECT_FALSE(opt.HasMember("eps"));                      // base key sophia does not declare
  auto sched = parse(c.section_json("scheduler"));
  EXPECT_FALSE(sched.HasMember("power"));  // cosine_with_warmup does not declare it
  EXPECT_EQ(sched["warmup_steps"].GetInt(), 0);
  EXPECT_EQ(parse(c.section_json("data"))["streaming"].GetBool(), false);
  EXPECT_EQ(parse(c.section_json("model"))["norm"].GetString(), std::string("scalenorm"));
  EXPECT_EQ(c.section_json("data.tokenizer"), "{\"path\":\"hf://gpt2\"}");
}

// The model's fields and defaults are the plugin's options schema: the host
// fills them from there (the same values its own schema used to give).
TEST(Load, ModelDefaultsAreThePluginsOwn) {
  const config_test::Glm52SchemaProvider glm52;
  HarnessConfig c = HarnessConfig::from_string(kBase, "test.yaml");
  c.validate(&glm52);
  auto m = parse(c.section_json("model"));
  EXPECT_STREQ(m["type"].GetString(), "glm52");
  EXPECT_STREQ(m["variant"].GetString(), "nano");
  EXPECT_EQ(m["moe_experts"].GetInt(), 8);
  EXPECT_EQ(m["moe_top_k"].GetInt(), 2);
  EXPECT_EQ(m["max_seq_len"].GetInt(), 1024);  // the host's field
  EXPECT_FALSE(m.HasMember("d_model"));        // the variant decides
  // Without the plugin's schema, the host fills only its own model fields.
  auto bare = parse(valid("").section_json("model"));
  EXPECT_FALSE(bare.HasMember("variant"));
  EXPECT_EQ(bare["max_seq_len"].GetInt(), 1024);
}

// No plugin at all (an empty plugin path): one line that says so, not one
// "no ... plugin named" line per section (ten for the quickstart config).
TEST(PluginSchemas, EmptyPluginPathIsSaidOnce) {
  FakeProvider none;
  const Lines e = errs("optimizer:\n  name: adamw\ncallbacks:\n  - type: early_stopping\n", &none);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].rfind("no plugins found: the plugin path is empty; set ZCODE_PLUGIN_PATH", 0), 0u) << e[0];
}

// Folders were searched but held no plugin: the message names them (not
// "the plugin path is empty").
TEST(PluginSchemas, NoPluginsNamesTheFoldersSearched) {
  struct Searched : FakeProvider {
    std::vector<std::string> searched_folders() const override { return {"/opt/a/plugins", "/home/u/zc"}; }
  } searched;
  const Lines e = errs("optimizer:\n  name: adamw\n", &searched);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("no plugins found: none in the folders searched (/opt/a/plugins, /home/u/zc)"), std::string::npos)
      << e[0];
  EXPECT_EQ(e[0].find("is empty"), std::string::npos) << e[0];
}

TEST(PluginSchemas, MissingComponentsAreErrorsWithHints) {
  // With no close name, the message lists the components of that kind that
  // are there (issue #17, item 6: before, it named none).
  FakeProvider p = standard_provider();
  EXPECT_EQ(errs("optimizer:\n  name: adamx\n", &p),
            (Lines{"optimizer.name: no optimizer plugin named 'adamx' on the plugin path (did you mean 'adamw'?)"}));
  EXPECT_EQ(errs("model:\n  type: glm53\n", &p),
            (Lines{"model.type: no model plugin named 'glm53' on the plugin path (did you mean 'glm52'?)"}));
  EXPECT_EQ(errs("scheduler:\n  type: cosine\n", &p),
            (Lines{"scheduler.type: no scheduler plugin named 'cosine' on the plugin path (did you mean "
                   "'cosine_with_warmup'?)"}));
  EXPECT_EQ(
      errs("evaluation:\n  plugins: [lm, fact_checker]\n", &p),
      (Lines{"evaluation.plugins[1]: no evaluator plugin named 'fact_checker' on the plugin path (available: lm)"}));
  EXPECT_EQ(errs("callbacks:\n  - type: console\n  - type: early_stoping\n", &p),
            (Lines{"callbacks[1].type: no callback plugin named 'early_stoping' on the plugin path (available: "
                   "checkpoint, console, metrics_json, metrics_jsonl, model_card)"}));
  EXPECT_EQ(errs("  tokenizer: spm/tok.model\n", &p),
            (Lines{"data.tokenizer: no tokenizer plugin named 'sentencepiece' on the plugin path (available: bpe)"}));
  // Names compare case-insensitively with '-' == '_'.
  EXPECT_EQ(errs("optimizer:\n  name: AdamW\nmodel:\n  type: GLM5pt2\n", &p), Lines{});
}

TEST(PluginSchemas, OptionErrorsInOurWording) {
  FakeProvider p = standard_provider();
  EXPECT_EQ(errs("optimizer:\n  name: sophia\n  rhoo: 0.1\n", &p),
            (Lines{"optimizer.rhoo: unknown key for optimizer 'sophia' (did you mean 'rho'?)"}));
  // exclusiveMinimum written as a number (draft 2020-12) is understood.
  EXPECT_EQ(errs("optimizer:\n  name: sophia\n  rho: 0\n", &p),
            (Lines{"optimizer.rho: expected a number > 0, found 0"}));
  EXPECT_EQ(errs("model:\n  d_model: 4\n", &p), (Lines{"model.d_model: expected an integer >= 8, found 4"}));
  EXPECT_EQ(errs("model:\n  norm: layernorm\n", &p),
            (Lines{"model.norm: 'layernorm' is not one of scalenorm, rmsnorm"}));
  EXPECT_EQ(errs("scheduler:\n  type: wsd\n  decay_shape: sqrt\n", &p),
            (Lines{"scheduler.decay_shape: 'sqrt' is not one of linear, cosine, 1-sqrt (did you mean '1-sqrt'?)"}));
  EXPECT_EQ(errs("callbacks:\n  - type: checkpoint\n    every: 0\n", &p),
            (Lines{"callbacks[0].every: expected an integer >= 1, found 0"}));
  EXPECT_EQ(errs("  tokenizer: {path: hf://gpt2, allowed_special: all}\n", &p),
            (Lines{"data.tokenizer.allowed_special: expected a list, found string 'all'"}));
  // A key the base schema already rejects is reported once, in the base wording.
  EXPECT_EQ(errs("optimizer:\n  lr: 0\n", &p), (Lines{"optimizer.lr: expected a number > 0, found 0"}));
  // Plugin keys are checked only with a provider: without one they pass through.
  EXPECT_EQ(errs("optimizer:\n  name: sophia\n  rhoo: 0.1\n"), Lines{});
}

TEST(PluginSchemas, WrongShapesNeverCrash) {
  FakeProvider p = standard_provider();
  EXPECT_EQ(
      errs("model: 5\noptimizer: []\ncallbacks: {type: console}\nscheduler: null\nevaluation:\n  plugins: [3]\n", &p),
      (Lines{"model: expected a mapping, found number 5", "optimizer: expected a mapping, found a list []",
             "callbacks: expected a list, found a mapping {\"type\":\"console\"}",
             "scheduler: expected a mapping, found null", "evaluation.plugins[0]: expected a string, found number 3"}));
  EXPECT_EQ(errors_of("data: x\n", &p), (Lines{"data: expected a mapping, found string 'x'"}));
  EXPECT_EQ(errors_of("", &p), (Lines{"data: missing required key"}));
}

TEST(PluginSchemas, TokenizerComponentInference) {
  HarnessConfig a = valid("  tokenizer: models/spm.model\n");
  EXPECT_EQ(a.data().tokenizer_type, "sentencepiece");
  EXPECT_EQ(a.data().tokenizer_options_json, "{\"path\":\"models/spm.model\"}");
  HarnessConfig b = valid("  tokenizer: {type: SentencePiece, path: x.json, special_tokens: {pad: 0}}\n");
  EXPECT_EQ(b.data().tokenizer_type, "sentencepiece");
  EXPECT_EQ(b.section_json("data.tokenizer"), R"({"type":"SentencePiece","path":"x.json","special_tokens":{"pad":0}})");
  EXPECT_EQ(valid("").data().tokenizer_type, "bpe");
}

}  // namespace

namespace {

// A null optional path means "unset" (YAML `~`/`null`, or a plugin schema's
// `default: null` saved into a checkpoint's resolved config and read back).
TEST(Validate, NullOptionalPathsMeanUnset) {
  EXPECT_EQ(errs("  val_path: null\n  train_shard_pattern: ~\n  cache_dir: null\n"), Lines{});
  HarnessConfig c = valid("  val_path: null\n  val_fraction: 0.1\n");
  EXPECT_FALSE(c.data().val_path.has_value());
  EXPECT_EQ(c.data().val_fraction, 0.1);
  // A real val_path together with val_fraction is still refused.
  EXPECT_EQ(errs("  val_path: v.jsonl\n  val_fraction: 0.1\n"),
            (Lines{"data.val_fraction: 0.1 cannot be combined with data.val_path; use one of them"}));
}

}  // namespace

namespace {

// With no data.tokenizer, validation checks the tokenizer plugin's options
// with the built-in default reference (what the engine then creates), so a
// plugin schema that requires `path` is satisfied.
TEST(PluginSchemas, AbsentTokenizerUsesTheDefaultReference) {
  FakeProvider p = standard_provider();
  p.schemas[{ZC_KIND_TOKENIZER, "bpe"}] =
      R"({"type":"object","required":["path"],"properties":{"path":{"type":"string"},"allowed_special":{"type":"array"}},"additionalProperties":false})";
  EXPECT_EQ(errs("", &p), Lines{});
  EXPECT_EQ(errs("  tokenizer: {allowed_special: []}\n", &p), (Lines{"data.tokenizer.path: missing required key"}));
}

}  // namespace
