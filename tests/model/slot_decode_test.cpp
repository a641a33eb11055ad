// glm52 slot decoding (zc_model_table.decode_slots_*, ABI 1.6): the batch
// invariance abi.h promises. Every row a slot session writes must equal, bit
// for bit, the logits of decode_step on a batch-1 session fed the same
// sequence token by token (the path of `zcode-host generate`), whatever the
// other entries of the step, the chunking of the prompt, the entry order,
// slot reuse or the thread count.
#include "test_util.h"

#include <zcode/kernels/threads.h>

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

namespace {

// The same two shapes as the KV-cache tests of model_test.cpp: deepnorm with
// GQA, partial rotary, a shared expert and a dense first layer; prenorm with
// RMSNorm, untied head and entropy head masking.
const char* kDeep = R"({"vocab_size": 300, "d_model": 32, "n_layers": 3, "n_heads": 4, "n_kv_heads": 2,
  "head_dim": 8, "ffn_hidden": 48, "moe_experts": 4, "moe_top_k": 2, "moe_ffn_hidden": 24,
  "moe_shared_experts": 1, "first_dense_layers": 1, "capacity_factor": 0, "rotary_fraction": 0.5, "max_seq_len": 64})";
const char* kPre = R"({"vocab_size": 300, "d_model": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 1, "head_dim": 8,
  "moe_experts": 4, "moe_top_k": 1, "moe_ffn_hidden": 24, "first_dense_layers": 0, "residual": "prenorm",
  "norm": "rmsnorm", "tie_embeddings": false, "max_seq_len": 64,
  "dynamic_head_mask": {"enabled": true, "entropy_threshold": 1.5}})";

constexpr int kV = 300;

std::vector<std::vector<int32_t>> sequences() {
  std::mt19937 rng(3);
  std::vector<std::vector<int32_t>> s;
  for (int len : {21, 13, 30, 7}) {
    std::vector<int32_t> q(static_cast<size_t>(len));
    for (auto& t : q) t = static_cast<int32_t>(rng() % kV);
    s.push_back(q);
  }
  return s;
}

// Reference: logits after each token of `seq`, from decode_step on a batch-1 session.
std::vector<float> alone(glm52::Model<float>& m, const std::vector<int32_t>& seq) {
  auto* s = m.decode_begin(1, 64);
  std::vector<float> out(seq.size() * kV);
  for (size_t t = 0; t < seq.size(); ++t) m.decode_step(s, &seq[t], out.data() + t * kV);
  m.decode_end(s);
  return out;
}

// One step of a schedule: feed `count` next tokens of sequence `seq` into slot `slot`.
struct Feed {
  int seq, slot, count;
};

// Runs a schedule on a slot session and checks every row against `ref`.
void run_schedule(glm52::Model<float>& m, const std::vector<std::vector<int32_t>>& seqs,
                  const std::vector<std::vector<float>>& ref, const std::vector<std::vector<Feed>>& steps,
                  bool reverse_entries, const char* what) {
  auto* s = m.decode_slots_begin(4, 40, 48);
  std::vector<size_t> fed(seqs.size(), 0);
  std::vector<int> slot_seq(4, -1);
  std::vector<float> out(48 * kV);
  for (size_t k = 0; k < steps.size(); ++k) {
    std::vector<int32_t> slot_of, tokens;
    std::vector<std::pair<int, size_t>> who;  // (seq, position) of each entry
    for (const Feed& f : steps[k]) {
      if (slot_seq[f.slot] != f.seq) {  // a new sequence takes the slot
        m.decode_slot_reset(s, f.slot);
        slot_seq[f.slot] = f.seq;
      }
      for (int j = 0; j < f.count; ++j) {
        const size_t pos = fed[f.seq]++;
        slot_of.push_back(f.slot);
        tokens.push_back(seqs[f.seq][pos]);
        who.emplace_back(f.seq, pos);
      }
    }
    if (reverse_entries) {  // entries of different slots in another order (a slot's own stay in order)
      std::vector<int32_t> so2, tk2;
      std::vector<std::pair<int, size_t>> w2;
      for (auto f = steps[k].rbegin(); f != steps[k].rend(); ++f)
        for (size_t i = 0; i < who.size(); ++i)
          if (slot_of[i] == f->slot) {
            so2.push_back(slot_of[i]);
            tk2.push_back(tokens[i]);
            w2.push_back(who[i]);
          }
      slot_of.swap(so2);
      tokens.swap(tk2);
      who.swap(w2);
    }
    m.decode_slots_step(s, static_cast<int>(tokens.size()), slot_of.data(), tokens.data(), nullptr, out.data());
    for (size_t i = 0; i < who.size(); ++i) {
      const auto [q, pos] = who[i];
      ASSERT_EQ(0, std::memcmp(out.data() + i * kV, ref[q].data() + pos * kV, kV * sizeof(float)))
          << what << ": step " << k << ", sequence " << q << ", position " << pos;
    }
  }
  m.decode_end(s);
}

void invariance_case(const char* json) {
  const glm52::Config cfg = glm52_test::make_config(json);
  glm52::Model<float> m(cfg, 77);
  const auto seqs = sequences();
  zcode::kernels::set_num_threads(1);
  std::vector<std::vector<float>> ref;
  for (const auto& q : seqs) ref.push_back(alone(m, q));

  // Mix 1: sequences 0..2 token by token side by side (each at its own position).
  std::vector<std::vector<Feed>> lockstep;
  for (int t = 0; t < 13; ++t) lockstep.push_back({{0, 0, 1}, {1, 1, 1}, {2, 2, 1}});
  // Mix 2: chunked prefill beside decoding: 0 arrives in chunks of 7 while 1
  // decodes one token a step; 1 ends and 3 takes its slot; 2 arrives whole.
  std::vector<std::vector<Feed>> chunked = {{{1, 1, 5}},
                                            {{1, 1, 1}, {0, 0, 7}},
                                            {{1, 1, 1}, {0, 0, 7}, {2, 2, 30}},
                                            {{1, 1, 1}, {0, 0, 7}},
                                            {{1, 1, 5}},
                                            {{3, 1, 4}},
                                            {{3, 1, 3}}};
  // Mix 3: one sequence alone in a big slot session, token by token, then the rest in one call.
  std::vector<std::vector<Feed>> single = {{{3, 2, 1}}, {{3, 2, 1}}, {{3, 2, 5}}};

  run_schedule(m, seqs, ref, lockstep, false, "lockstep");
  run_schedule(m, seqs, ref, chunked, false, "chunked prefill");
  run_schedule(m, seqs, ref, chunked, true, "chunked prefill, entries reversed");
  run_schedule(m, seqs, ref, single, false, "alone");
  zcode::kernels::set_num_threads(2);
  run_schedule(m, seqs, ref, lockstep, true, "lockstep, 2 threads");
  run_schedule(m, seqs, ref, chunked, false, "chunked prefill, 2 threads");
}

TEST(SlotDecode, RowsEqualBatchOneDecodeStepDeepNorm) { invariance_case(kDeep); }
TEST(SlotDecode, RowsEqualBatchOneDecodeStepPreNormHeadMask) { invariance_case(kPre); }

TEST(SlotDecode, WantLogitsSelectsRowsInEntryOrder) {
  zcode::kernels::set_num_threads(1);
  const glm52::Config cfg = glm52_test::make_config(kDeep);
  glm52::Model<float> m(cfg, 77);
  const auto seqs = sequences();
  const auto r0 = alone(m, seqs[0]), r1 = alone(m, seqs[1]);
  auto* s = m.decode_slots_begin(2, 40, 8);
  // Slot 1: 4 prompt tokens (only the last wanted); slot 0: 2 tokens (both wanted).
  const int32_t slot_of[6] = {1, 1, 1, 1, 0, 0};
  const int32_t tokens[6] = {seqs[1][0], seqs[1][1], seqs[1][2], seqs[1][3], seqs[0][0], seqs[0][1]};
  const uint8_t want[6] = {0, 0, 0, 1, 1, 1};
  std::vector<float> out(3 * kV, -1.f);
  m.decode_slots_step(s, 6, slot_of, tokens, want, out.data());
  EXPECT_EQ(0, std::memcmp(out.data(), r1.data() + 3 * kV, kV * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(out.data() + kV, r0.data(), kV * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(out.data() + 2 * kV, r0.data() + kV, kV * sizeof(float)));
  m.decode_end(s);
}

TEST(SlotDecode, BadStepsAreRefusedAndNoSlotAdvances) {
  zcode::kernels::set_num_threads(1);
  const glm52::Config cfg = glm52_test::make_config(kDeep);
  glm52::Model<float> m(cfg, 77);
  const auto seqs = sequences();
  const auto r0 = alone(m, seqs[0]);
  auto* s = m.decode_slots_begin(2, 4, 8);
  std::vector<float> out(8 * kV);
  auto message = [&](int n, std::vector<int32_t> slot_of, std::vector<int32_t> tokens) {
    try {
      m.decode_slots_step(s, n, slot_of.data(), tokens.data(), nullptr, out.data());
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(1, {2}, {5}), "decode_slots_step: slot_of[0] = 2 (expected 0..1)");
  EXPECT_EQ(message(2, {0, 0}, {5, 300}), "decode_slots_step: tokens[1] = 300 out of range [0, 300)");
  EXPECT_EQ(message(9, {0}, {5}), "decode_slots_step: n = 9 entries (expected 1..8, the session's max_tokens)");
  // Five tokens into a slot of four: refused, and slot 0 is still empty.
  EXPECT_EQ(message(5, {0, 0, 0, 0, 0}, {1, 2, 3, 4, 5}), "decode_slots_step: slot 0 is full (max_len 4)");
  m.decode_slots_step(s, 1, std::vector<int32_t>{0}.data(), &seqs[0][0], nullptr, out.data());
  EXPECT_EQ(0, std::memcmp(out.data(), r0.data(), kV * sizeof(float)));
  EXPECT_THROW(m.decode_step(s, &seqs[0][0], out.data()), std::exception);  // not for a slot session
  m.decode_end(s);
  EXPECT_THROW(m.decode_slots_begin(0, 4, 8), std::exception);
  EXPECT_THROW(m.decode_slots_begin(1, 65, 8), std::exception);  // past max_seq_len 64
}

// decode_extend (ABI 1.8, a prompt's prefill in one call) against n
// decode_step calls: the same last logits and the same cache (the next steps
// give the same bits), in one chunk (batch 1) and in two (batch 8 x 40
// positions: chunks of 32 positions at 256 rows), for both shapes.
TEST(DecodeExtend, EqualsStepByStep) {
  zcode::kernels::set_num_threads(2);
  for (const char* json : {kDeep, kPre}) {
    const glm52::Config cfg = glm52_test::make_config(json);
    glm52::Model<float> m(cfg, 77);
    for (const auto& [B, n] : {std::pair{1, 21}, std::pair{8, 40}}) {
      SCOPED_TRACE("batch " + std::to_string(B) + ", n " + std::to_string(n));
      if (B == 8) {
        ASSERT_LT(glm52::Model<float>::kExtendRows / B, n);  // two chunks
      }
      std::mt19937 rng(static_cast<unsigned>(B * 100 + n));
      std::vector<int32_t> prompt(size_t(B) * n);  // [B, n]
      for (auto& t : prompt) t = static_cast<int32_t>(rng() % kV);
      auto* a = m.decode_begin(B, 64);
      auto* b = m.decode_begin(B, 64);
      std::vector<float> la(size_t(B) * kV), lb(size_t(B) * kV, -1.f);
      std::vector<int32_t> col(static_cast<size_t>(B));
      for (int t = 0; t < n; ++t) {
        for (int i = 0; i < B; ++i) col[size_t(i)] = prompt[size_t(i) * n + t];
        m.decode_step(a, col.data(), la.data());
      }
      m.decode_extend(b, n, prompt.data(), lb.data());
      EXPECT_EQ(0, std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)));
      for (int step = 0; step < 5; ++step) {  // the caches agree: the next steps too
        for (int i = 0; i < B; ++i) col[size_t(i)] = static_cast<int32_t>((step * 31 + i * 7) % kV);
        m.decode_step(a, col.data(), la.data());
        m.decode_step(b, col.data(), lb.data());
        EXPECT_EQ(0, std::memcmp(la.data(), lb.data(), la.size() * sizeof(float))) << "step " << step;
      }
      m.decode_end(a);
      m.decode_end(b);
    }
  }
}

TEST(DecodeExtend, BadCallsAreRefusedAndNothingAdvances) {
  zcode::kernels::set_num_threads(1);
  const glm52::Config cfg = glm52_test::make_config(kDeep);
  glm52::Model<float> m(cfg, 77);
  const auto seqs = sequences();
  const auto r0 = alone(m, seqs[0]);
  auto* s = m.decode_begin(1, 8);
  std::vector<float> out(kV);
  auto message = [&](int n, std::vector<int32_t> tokens) {
    try {
      m.decode_extend(s, n, tokens.data(), out.data());
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(9, std::vector<int32_t>(9, 1)), "decode_extend: 9 tokens after 0 pass the session's max_len 8");
  EXPECT_EQ(message(2, {5, 300}), "decode_extend: tokens[0][1] = 300 out of range [0, 300)");
  EXPECT_EQ(message(0, {5}), "decode_extend: n = 0 (expected >= 1) or NULL tokens / out_logits");
  // Nothing advanced: the sequence's first 3 tokens give the reference's logits.
  m.decode_extend(s, 3, seqs[0].data(), out.data());
  EXPECT_EQ(0, std::memcmp(out.data(), r0.data() + 2 * kV, kV * sizeof(float)));
  m.decode_end(s);
  s = m.decode_slots_begin(1, 8, 4);
  EXPECT_EQ(message(1, {5}), "decode_extend: not for a slot session (use decode_slots_step)");
  m.decode_end(s);
}

}  // namespace
