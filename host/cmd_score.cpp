// zcode-host score: generation metrics for any text, one segment per line,
// as sacreBLEU's and rouge-score's command lines score files
// (zcode/textmetrics: BLEU, ROUGE-1/2/L, distinct-n, entropy, repetition).
#include "cli_common.h"
#include "commands.h"

#include <zcode/sdk/json.h>
#include <zcode/textmetrics/bleu.h>
#include <zcode/textmetrics/diversity.h>
#include <zcode/textmetrics/meteor.h>
#include <zcode/textmetrics/rouge.h>

#include <fstream>
#include <iostream>
#include <sstream>

namespace zcode::host {

namespace {

namespace tm = zcode::textmetrics;

// The lines of `path`: one segment each ("\r\n" ends a line too; an empty
// line is an empty segment; a final line break does not start one).
// Throws std::runtime_error naming the file.
std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open file");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out.push_back(std::move(line));
  }
  if (in.bad()) throw std::runtime_error(path + ": read error");
  return out;
}

void put_rouge(sdk::json::Writer& w, const char* name, const tm::RougeScore& s) {
  w.key(name).begin_object().key("precision").number(s.precision).key("recall").number(s.recall);
  w.key("fmeasure").number(s.fmeasure).end_object();
}

}  // namespace

int cmd_score(const std::vector<std::string>& args) {
  const CommandHelp help{
      "zcode-host score --metric bleu|rouge|meteor|distinct --hypotheses H.txt [--references R.txt ...] [--json]",
      "Score generated text against references, one segment per line: corpus BLEU as sacreBLEU computes it "
      "(13a tokenizer, exp smoothing; several --references files for multi-reference BLEU), ROUGE-1/2/L "
      "F-measure as rouge-score computes it (--unicode: words of any script), METEOR as NLTK's meteor_score "
      "(whitespace tokens; exact, Porter stem and WordNet synonym matches; mean over segments), or distinct-1/2, "
      "token entropy and repetition (seq-rep-4) of the hypotheses alone.",
      "  zcode-host score --metric bleu --hypotheses out.txt --references ref1.txt --references ref2.txt\n"
      "  zcode-host score --metric rouge --hypotheses out.txt --references ref.txt --json\n"
      "  zcode-host score --metric meteor --hypotheses out.txt --references ref.txt\n"
      "  zcode-host score --metric distinct --hypotheses samples.txt"};
  std::string metric, hyp_path;
  std::vector<std::string> ref_paths;
  bool json = false, unicode = false;
  std::string wordnet_dir = "/usr/share/wordnet";
  po::options_description d("options");
  d.add_options()("metric", po::value(&metric)->required(), "bleu, rouge, meteor or distinct")(
      "hypotheses", po::value(&hyp_path)->required(), "file of hypotheses, one segment per line")(
      "references", po::value(&ref_paths)->composing(), "file of references, line i for hypothesis i (repeatable)")(
      "json", po::bool_switch(&json), "print one JSON object instead of text")(
      "unicode", po::bool_switch(&unicode), "rouge: words of every script (ICU), not only [a-z0-9]")(
      "wordnet", po::value(&wordnet_dir), "meteor: the WordNet 3.0 database folder (default /usr/share/wordnet)");
  po::positional_options_description pos;
  po::variables_map vm;
  if (auto rc = parse_args("score", args, d, pos, vm, help)) return *rc;
  if (metric != "bleu" && metric != "rouge" && metric != "distinct" && metric != "meteor") {
    std::cerr << "zcode-host score: --metric: expected bleu, rouge, meteor or distinct, found '" << metric << "'\n";
    return kUsageError;
  }
  if (metric != "distinct" && ref_paths.empty()) {
    std::cerr << "zcode-host score: --metric " << metric << " needs at least one --references file\n";
    return kUsageError;
  }
  try {
    const std::vector<std::string> hyps = read_lines(hyp_path);
    std::vector<std::vector<std::string>> refs;
    for (const std::string& p : ref_paths) {
      refs.push_back(read_lines(p));
      if (refs.back().size() != hyps.size()) {
        auto lines = [](size_t n) { return std::to_string(n) + (n == 1 ? " line" : " lines"); };
        std::cerr << "zcode-host score: " << p << " has " << lines(refs.back().size()) << ", " << hyp_path << " has "
                  << lines(hyps.size()) << ": every references file needs one line per hypothesis\n";
        return kUsageError;
      }
    }
    sdk::json::Writer w;
    std::ostringstream text;
    if (metric == "bleu") {
      const tm::Bleu b = tm::corpus_bleu(hyps, refs);
      w.begin_object().key("name").string("BLEU").key("score").number(b.score).key("precisions").begin_array();
      for (double p : b.precisions) w.number(p);
      w.end_array().key("bp").number(b.bp).key("ratio").number(b.ratio).key("hyp_len").integer(b.sys_len);
      w.key("ref_len").integer(b.ref_len).key("tokenizer").string("13a").key("smooth").string("exp");
      w.key("references").integer(static_cast<int64_t>(refs.size())).end_object();
      text << tm::format_bleu(b) << "\n";
    } else if (metric == "rouge") {
      const tm::Rouge r = tm::corpus_rouge(hyps, refs, unicode);
      w.begin_object().key("tokenizer").string(unicode ? "unicode" : "rouge_score");
      put_rouge(w, "rouge1", r.rouge1);
      put_rouge(w, "rouge2", r.rouge2);
      put_rouge(w, "rougeL", r.rougeL);
      w.key("segments").integer(static_cast<int64_t>(hyps.size())).end_object();
      char b[256];
      for (auto [name, s] :
           {std::pair{"rouge1", r.rouge1}, std::pair{"rouge2", r.rouge2}, std::pair{"rougeL", r.rougeL}}) {
        std::snprintf(b, sizeof b, "%s: P = %.4f R = %.4f F = %.4f\n", name, s.precision, s.recall, s.fmeasure);
        text << b;
      }
    } else if (metric == "meteor") {
      tm::WordNet wn(wordnet_dir);
      std::vector<double> scores;
      double sum = 0;
      for (size_t i = 0; i < hyps.size(); ++i) {
        std::vector<std::vector<std::string>> r;
        for (const auto& set : refs) r.push_back(tm::whitespace_tokens(set[i]));
        scores.push_back(tm::meteor(r, tm::whitespace_tokens(hyps[i]), wn));
        sum += scores.back();
      }
      const double mean = hyps.empty() ? 0 : sum / static_cast<double>(hyps.size());
      w.begin_object().key("name").string("METEOR").key("score").number(mean).key("alpha").number(0.9);
      w.key("beta").number(3.0).key("gamma").number(0.5).key("segments").begin_array();
      for (double x : scores) w.number(x);
      w.end_array().end_object();
      char b[128];
      std::snprintf(b, sizeof b, "METEOR = %.4f (mean of %zu segments; alpha 0.9, beta 3, gamma 0.5)\n", mean,
                    hyps.size());
      text << b;
    } else {
      std::vector<std::vector<std::string>> gens;
      for (const auto& h : hyps) gens.push_back(tm::whitespace_tokens(h));
      const tm::Diversity v = tm::diversity(gens);
      w.begin_object().key("distinct_1").number(v.distinct_1).key("distinct_2").number(v.distinct_2);
      w.key("entropy_bits").number(v.entropy_bits).key("repetition").number(v.repetition);
      w.key("tokens").integer(v.tokens).key("generations").integer(v.generations).end_object();
      char b[256];
      std::snprintf(b, sizeof b,
                    "distinct-1 = %.4f distinct-2 = %.4f entropy = %.4f bits repetition (seq-rep-4) = %.4f "
                    "(tokens = %lld, generations = %lld)\n",
                    v.distinct_1, v.distinct_2, v.entropy_bits, v.repetition, static_cast<long long>(v.tokens),
                    static_cast<long long>(v.generations));
      text << b;
    }
    std::cout << (json ? w.str() + "\n" : text.str());
    return kOk;
  } catch (const std::exception& e) {
    std::cerr << "zcode-host score: " << e.what() << "\n";
    return kUsageError;
  }
}

}  // namespace zcode::host
