// Checkpoint folders: round trip, SHA-256 against a known vector, and every
// corruption refused with a message naming the file; a SIGKILL during a
// write leaves the previous checkpoint valid and `latest` naming it.
#include <zcode/core/checkpoint.h>

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

namespace {

namespace fs = std::filesystem;
using zcode::ckpt::CheckpointError;

fs::path fresh_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("zcode_ckpt_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

zcode::ckpt::CheckpointContents contents(uint64_t step, size_t n = 4) {
  zcode::ckpt::CheckpointContents c;
  c.step = step;
  std::vector<float> w(n);
  for (size_t i = 0; i < n; ++i) w[i] = static_cast<float>(step * 10 + i);
  int64_t shape[1] = {static_cast<int64_t>(n)};
  c.model.add("embed.weight", "F32", shape, w.data(), n * 4);
  c.optimizer.add("embed.weight.exp_avg", "F32", shape, w.data(), n * 4);
  c.state_json = "{\"step\":" + std::to_string(step) + ",\"stages\":{}}";
  return c;
}

std::string load_error(const fs::path& dir) {
  try {
    zcode::ckpt::load_checkpoint(dir);
    return "";
  } catch (const CheckpointError& e) {
    return e.what();
  }
}

TEST(Checkpoint, Sha256KnownVector) {
  // FIPS 180-4 / NIST example "abc".
  EXPECT_EQ(zcode::ckpt::sha256_hex("abc", 3), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Checkpoint, RoundTripLatestAndKeepLastN) {
  fs::path root = fresh_dir("rt");
  for (uint64_t s : {2, 4, 6, 8}) zcode::ckpt::write_checkpoint(root, contents(s), 2);
  auto all = zcode::ckpt::list_checkpoints(root);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].first, 6u);
  EXPECT_EQ(all[1].first, 8u);
  EXPECT_EQ(zcode::ckpt::resolve(root.string(), root).filename(), "step_8");
  std::ifstream in(root / "latest");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "step_8");
}

TEST(Checkpoint, ResolveAndLoad) {
  fs::path run = fresh_dir("load");
  fs::path root = run / "checkpoints";
  zcode::ckpt::write_checkpoint(root, contents(3), 0);
  zcode::ckpt::write_checkpoint(root, contents(5), 0);
  fs::path dir = zcode::ckpt::resolve("latest", run);
  EXPECT_EQ(dir.filename(), "step_5");
  EXPECT_EQ(zcode::ckpt::resolve(run.string(), run).filename(), "step_5");
  auto c = zcode::ckpt::load_checkpoint(dir);
  EXPECT_EQ(c.step, 5u);
  const auto& t = c.model->at("embed.weight");
  float v[4];
  std::memcpy(v, t.data, 16);
  EXPECT_EQ(v[3], 53.0f);
  EXPECT_NE(c.state_json.find("\"files\""), std::string::npos);
  EXPECT_EQ(zcode::ckpt::resolve((root / "step_3").string(), run).filename(), "step_3");
  EXPECT_THROW(zcode::ckpt::resolve((run / "nope").string(), run), CheckpointError);
}

TEST(Checkpoint, CorruptionsAreRefusedNamingTheFile) {
  fs::path root = fresh_dir("corrupt");
  fs::path good = zcode::ckpt::write_checkpoint(root, contents(1), 0);
  auto copy = [&](const std::string& name) {
    fs::path d = root / name;
    fs::copy(good, d, fs::copy_options::recursive);
    return d;
  };
  {  // truncated
    fs::path d = copy("step_10");
    fs::resize_file(d / "model.safetensors", fs::file_size(d / "model.safetensors") - 3);
    std::string e = load_error(d);
    EXPECT_NE(e.find("model.safetensors: SHA-256 mismatch"), std::string::npos) << e;
  }
  {  // one flipped byte in the optimizer file
    fs::path d = copy("step_11");
    std::fstream f(d / "optimizer.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-2, std::ios::end);
    f.put('\x7f');
    f.close();
    std::string e = load_error(d);
    EXPECT_NE(e.find("optimizer.safetensors: SHA-256 mismatch"), std::string::npos) << e;
  }
  {  // missing file
    fs::path d = copy("step_12");
    fs::remove(d / "state.json");
    std::string e = load_error(d);
    EXPECT_NE(e.find("state.json: missing"), std::string::npos) << e;
  }
  {  // a header with bad offsets whose hashes were recomputed: the parser refuses it
    fs::path d = copy("step_13");
    std::string h = R"({"embed.weight":{"dtype":"F32","shape":[4],"data_offsets":[0,4000]}})";
    std::string file(8, '\0');
    for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((h.size() >> (8 * i)) & 0xff);
    file += h + std::string(16, '\0');
    { std::ofstream(d / "model.safetensors", std::ios::binary) << file; }
    {  // make state.json agree with the new file, so that only the parser can object
      std::ifstream in(d / "state.json");
      std::string st((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      const std::string old_hash = zcode::ckpt::sha256_file(good / "model.safetensors");
      st.replace(st.find(old_hash), old_hash.size(), zcode::ckpt::sha256_file(d / "model.safetensors"));
      std::ofstream(d / "state.json") << st;
    }
    std::string sums;
    for (const char* f : {"model.safetensors", "optimizer.safetensors", "state.json"})
      sums += zcode::ckpt::sha256_file(d / f) + "  " + f + "\n";
    { std::ofstream(d / "SHA256SUMS") << sums; }
    std::string e = load_error(d);
    EXPECT_NE(e.find("model.safetensors: safetensors: tensor 'embed.weight': data_offsets end 4000 exceeds"),
              std::string::npos) << e;
  }
  EXPECT_EQ(load_error(good), "") << "the original checkpoint must be untouched";
}

TEST(Checkpoint, DeeplyNestedStateJsonIsRefusedNotACrash) {
  // A state.json whose hashes were recomputed, so that only its parse can
  // object: {"step":1,"x": then 10^6 '['. The root and 255 lists are read;
  // the 256th '[' (byte 14 + 255, column 270) would be the 257th level.
  fs::path root = fresh_dir("deep_state");
  fs::path d = zcode::ckpt::write_checkpoint(root, contents(1), 0);
  const size_t n = 1000000;
  { std::ofstream(d / "state.json") << "{\"step\":1,\"x\":" << std::string(n, '[') << std::string(n, ']') << "}"; }
  std::string sums;
  for (const char* f : {"model.safetensors", "optimizer.safetensors", "state.json"})
    sums += zcode::ckpt::sha256_file(d / f) + "  " + f + "\n";
  { std::ofstream(d / "SHA256SUMS") << sums; }
  std::string shown = "x";
  for (int i = 0; i < 255; ++i) shown += "[0]";
  EXPECT_EQ(load_error(d), (d / "state.json").string() + ":1:270: nesting deeper than 256 levels at " + shown.substr(0, 80) + "...");
}

TEST(Checkpoint, KillDuringWriteKeepsThePreviousCheckpoint) {
  fs::path root = fresh_dir("kill");
  zcode::ckpt::write_checkpoint(root, contents(1), 0);
  for (int attempt = 0; attempt < 3; ++attempt) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // 16 MiB tensors: each write takes long enough to be interrupted.
      for (uint64_t s = 100;; ++s) zcode::ckpt::write_checkpoint(root, contents(s, 4u << 20), 0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(40 + 35 * attempt));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status));
    fs::path latest = zcode::ckpt::resolve(root.string(), root);
    EXPECT_EQ(load_error(latest), "") << "latest = " << latest;
  }
  // The child's temp folders are left behind but never listed as checkpoints.
  for (const auto& [step, dir] : zcode::ckpt::list_checkpoints(root)) EXPECT_EQ(load_error(dir), "") << dir;
  fs::remove_all(root);
}

}  // namespace
