// Checkpoint folders: round trip, SHA-256 against a known vector, and every
// corruption refused with a message naming the file; a SIGKILL during a
// write leaves the previous checkpoint valid and `latest` naming it.
#include <zcode/core/checkpoint.h>
#include <zcode/core/host_services.h>

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <numeric>
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

// ZeRO-1 parts, as two ranks write them: tensor "m" [2, 5] = 0..9 held in
// parts (rank 0 elements [0, 4), rank 1 [4, 10)), tensor "c" [3] held whole
// by both. The index tiles each tensor; a load assembles "m" whole and reads
// any range across the parts.
TEST(Checkpoint, OptimizerPartsRoundTripAndReadAcrossPieces) {
  namespace ck = zcode::ckpt;
  const fs::path root = fresh_dir("parts");
  ck::CheckpointContents c = contents(4);
  const fs::path tmp = ck::begin_checkpoint(root, 4);
  std::vector<float> m(10), col = {7, 8, 9};
  std::iota(m.begin(), m.end(), 0.0f);
  const int64_t shape[2] = {2, 5};
  std::vector<std::string> rank_pieces;
  for (int r = 0; r < 2; ++r) {
    zcode::sdk::safetensors::Writer w;
    std::vector<ck::Piece> pieces;
    ck::StateWriterView v(&w, "", "optimizer", &pieces);
    const int64_t begin = r == 0 ? 0 : 4, count = r == 0 ? 4 : 6;
    int64_t n[1] = {count};
    DLTensor slice = zcode::sdk::make_view(m.data() + begin, zcode::sdk::kF32, 1, n);
    ASSERT_EQ(v.get()->put_tensor_slice(v.get()->ctx, "m", &slice, 2, shape, begin), nullptr);
    int64_t cn[1] = {3};
    DLTensor whole = zcode::sdk::make_view(col.data(), zcode::sdk::kF32, 1, cn);
    ASSERT_EQ(v.get()->put_tensor(v.get()->ctx, "c", &whole), nullptr);
    const std::string part = ck::optimizer_part_name(r, 2);
    EXPECT_EQ(part, r == 0 ? "optimizer-00000-of-00002.safetensors" : "optimizer-00001-of-00002.safetensors");
    c.optimizer_parts.emplace_back(part, ck::write_part(tmp, part, w.serialize()));
    rank_pieces.push_back(ck::pieces_json(pieces, part));
  }
  c.optimizer_index = ck::build_part_index(rank_pieces);
  const fs::path dir = ck::finish_checkpoint(root, tmp, c, 0);
  EXPECT_FALSE(fs::exists(dir / "optimizer.safetensors"));
  auto loaded = ck::load_checkpoint(dir);
  ASSERT_TRUE(loaded.optimizer_parts);
  EXPECT_EQ(loaded.optimizer, nullptr);
  EXPECT_EQ(loaded.optimizer_parts->names(), (std::vector<std::string>{"m", "c"}));
  const DLTensor* t = loaded.optimizer_parts->whole("m");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->ndim, 2);
  EXPECT_EQ(t->shape[1], 5);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(static_cast<const float*>(t->data)[i], static_cast<float>(i));
  // Elements [2, 7) straddle the two parts.
  std::vector<float> got(5);
  int64_t gn[1] = {5};
  DLTensor dst = zcode::sdk::make_view(got.data(), zcode::sdk::kF32, 1, gn);
  loaded.optimizer_parts->read_slice("m", 10, 2, dst);
  EXPECT_EQ(got, (std::vector<float>{2, 3, 4, 5, 6}));
  EXPECT_THROW(loaded.optimizer_parts->read_slice("m", 9, 2, dst), CheckpointError);   // another size
  EXPECT_THROW(loaded.optimizer_parts->read_slice("m", 10, 6, dst), CheckpointError);  // past its end
  // The same through a stage's reader (what a sharded optimizer's load_state calls).
  ck::StateReaderView rv(loaded.optimizer_parts.get(), "{}");
  std::fill(got.begin(), got.end(), -1.0f);
  int64_t two[1] = {2};
  DLTensor dst2 = zcode::sdk::make_view(got.data(), zcode::sdk::kF32, 1, two);
  ASSERT_EQ(rv.get()->read_tensor_slice(rv.get()->ctx, "c", 3, 1, &dst2), nullptr);
  EXPECT_EQ(got[0], 8.0f);
  EXPECT_EQ(got[1], 9.0f);
  zc_status* missing = rv.get()->read_tensor_slice(rv.get()->ctx, "nope", 3, 0, &dst2);
  ASSERT_NE(missing, nullptr);
  EXPECT_EQ(zcode::status_code(missing), static_cast<zc_status_code>(ZC_ERR_NOT_FOUND));
  zcode::status_release(missing);
  // A part missing from the folder: the load names it.
  fs::remove(dir / "optimizer-00001-of-00002.safetensors");
  EXPECT_NE(load_error(dir).find("optimizer-00001-of-00002.safetensors"), std::string::npos) << load_error(dir);
}

TEST(Checkpoint, PartIndexRefusesOverlapsGapsAndDisagreements) {
  namespace ck = zcode::ckpt;
  auto piece = [](int64_t b, int64_t n, std::vector<int64_t> shape = {10}) {
    ck::Piece p;
    p.name = "m";
    p.dtype = "F32";
    p.shape = std::move(shape);
    p.begin = b;
    p.count = n;
    return p;
  };
  auto index_error = [&](std::vector<std::vector<ck::Piece>> ranks) {
    std::vector<std::string> j;
    for (size_t r = 0; r < ranks.size(); ++r) {
      std::string part = "p";  // (+=: GCC 12's -Wrestrict false positive on "p" + to_string())
      part += std::to_string(r);
      j.push_back(ck::pieces_json(ranks[r], part));
    }
    try {
      ck::build_part_index(j);
      return std::string();
    } catch (const CheckpointError& e) {
      return std::string(e.what());
    }
  };
  EXPECT_EQ(index_error({{piece(0, 4)}, {piece(4, 6)}}), "");
  EXPECT_EQ(index_error({{piece(0, 5)}, {piece(4, 6)}}),
            "optimizer parts: tensor 'm' [10]: elements [4, 5) are in two ranks' parts");
  EXPECT_EQ(index_error({{piece(0, 3)}, {piece(4, 6)}}),
            "optimizer parts: tensor 'm' [10]: elements [3, 4) are in no rank's part");
  EXPECT_EQ(index_error({{piece(0, 4)}, {piece(4, 5)}}),
            "optimizer parts: tensor 'm' [10]: the parts cover 9 of its 10 elements");
  EXPECT_EQ(index_error({{piece(0, 4)}, {piece(4, 6, {2, 5})}}),
            "optimizer parts: tensor 'm' is F32 [10] on one rank and F32 [2, 5] on rank 1");
  ck::Piece w0 = piece(0, 10), w1 = piece(0, 10);
  w0.whole = w1.whole = true;
  w0.sha256 = "aa";
  w1.sha256 = "bb";
  EXPECT_NE(index_error({{w0}, {w1}}).find("differs between rank 0 and rank 1"), std::string::npos);
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
  // Copies under names that are not step_N (a step_N name must match the
  // step in state.json, which a copy of step_1 would not).
  auto copy = [&](const std::string& name) {
    fs::path d = root / name;
    fs::copy(good, d, fs::copy_options::recursive);
    return d;
  };
  {  // truncated
    fs::path d = copy("truncated");
    fs::resize_file(d / "model.safetensors", fs::file_size(d / "model.safetensors") - 3);
    std::string e = load_error(d);
    EXPECT_NE(e.find("model.safetensors: SHA-256 mismatch"), std::string::npos) << e;
  }
  {  // one flipped byte in the optimizer file
    fs::path d = copy("flipped");
    std::fstream f(d / "optimizer.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-2, std::ios::end);
    f.put('\x7f');
    f.close();
    std::string e = load_error(d);
    EXPECT_NE(e.find("optimizer.safetensors: SHA-256 mismatch"), std::string::npos) << e;
  }
  {  // missing file
    fs::path d = copy("missing");
    fs::remove(d / "state.json");
    std::string e = load_error(d);
    EXPECT_NE(e.find("state.json: missing"), std::string::npos) << e;
  }
  {  // a header with bad offsets whose hashes were recomputed: the parser refuses it
    fs::path d = copy("bad_offsets");
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
              std::string::npos)
        << e;
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
  EXPECT_EQ(load_error(d),
            (d / "state.json").string() + ":1:270: nesting deeper than 256 levels at " + shown.substr(0, 80) + "...");
  // evaluate/generate without --config read only state.json's config: the same bound.
  try {
    (void)zcode::ckpt::stored_config_json(d);
    ADD_FAILURE() << "a state.json nested 10^6 deep gave a config";
  } catch (const std::exception& e) {
    EXPECT_EQ(std::string(e.what()),
              (d / "state.json").string() + ":1:270: nesting deeper than 256 levels at " + shown.substr(0, 80) + "...");
  }
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
  // The next start removes them (their writer is dead), and nothing else.
  std::vector<fs::path> tmp_before, after;
  for (const auto& e : fs::directory_iterator(root))
    if (e.path().filename().string().rfind(".tmp-step_", 0) == 0) tmp_before.push_back(e.path());
  const auto checkpoints = zcode::ckpt::list_checkpoints(root);
  auto removed = zcode::ckpt::remove_stale_temp_folders(root);
  std::sort(tmp_before.begin(), tmp_before.end());
  EXPECT_EQ(removed, tmp_before);
  for (const auto& e : fs::directory_iterator(root))
    if (e.path().filename().string().rfind(".tmp-", 0) == 0) after.push_back(e.path());
  EXPECT_TRUE(after.empty());
  EXPECT_EQ(zcode::ckpt::list_checkpoints(root), checkpoints);
  fs::remove_all(root);
}

TEST(Checkpoint, StaleTempFoldersOnlyOfDeadProcesses) {
  fs::path root = fresh_dir("stale");
  zcode::ckpt::write_checkpoint(root, contents(2), 0);
  pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);  // now a PID that runs nothing
  pid_t parent = getppid();    // alive: the test runner's parent
  const fs::path dead = root / (".tmp-step_4-" + std::to_string(child));
  const fs::path mine = root / (".tmp-step_5-" + std::to_string(getpid()));  // this process wrote none
  const fs::path live = root / (".tmp-step_6-" + std::to_string(parent));
  const fs::path other = root / ".tmp-notes";  // not a checkpoint temp folder: never touched
  for (const auto& d : {dead, mine, live, other}) fs::create_directories(d);
  EXPECT_EQ(zcode::ckpt::remove_stale_temp_folders(root), (std::vector<fs::path>{dead, mine}));
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_FALSE(fs::exists(mine));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(other));
  EXPECT_EQ(load_error(root / "step_2"), "");
  EXPECT_TRUE(zcode::ckpt::remove_stale_temp_folders(root / "no_such_folder").empty());
  fs::remove_all(root);
}

TEST(Checkpoint, ResolveTakesTheLatestPointerFile) {
  fs::path run = fresh_dir("pointer");
  fs::path root = run / "checkpoints";
  zcode::ckpt::write_checkpoint(root, contents(3), 0);
  zcode::ckpt::write_checkpoint(root, contents(7), 0);
  // The path a run prints last, `.../checkpoints/latest`, is a file naming step_7.
  EXPECT_EQ(zcode::ckpt::resolve((root / "latest").string(), fs::path("elsewhere")), root / "step_7");
  EXPECT_EQ(zcode::ckpt::resolve((root / "latest").string(), run), zcode::ckpt::resolve("latest", run));
  // Another file is not a checkpoint; the message says what is expected.
  { std::ofstream(root / "notes.txt") << "x"; }
  try {
    zcode::ckpt::resolve((root / "notes.txt").string(), run);
    ADD_FAILURE() << "a plain file was accepted";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("notes.txt: is a file, not a checkpoint folder"), std::string::npos)
        << e.what();
  }
  // A pointer file naming garbage is refused naming the file.
  { std::ofstream(root / "latest") << "../../etc\n"; }
  EXPECT_THROW(zcode::ckpt::resolve((root / "latest").string(), run), CheckpointError);
  fs::remove_all(run);
}

TEST(Checkpoint, ModelOnlyLoadNeedsNoOptimizerFile) {
  fs::path root = fresh_dir("model_only");
  fs::path dir = zcode::ckpt::write_checkpoint(root, contents(4), 0);
  fs::remove(dir / "optimizer.safetensors");
  // A full load (resume) names the missing file and says what needs it.
  const std::string e = load_error(dir);
  EXPECT_NE(e.find((dir / "optimizer.safetensors").string() + ": missing (resuming training needs the optimizer state"),
            std::string::npos)
      << e;
  // Also when its SHA256SUMS line was removed with it (today's message was about SHA256SUMS).
  std::ifstream in(dir / "SHA256SUMS");
  std::string line, kept;
  while (std::getline(in, line))
    if (line.find("optimizer") == std::string::npos) kept += line + "\n";
  in.close();
  { std::ofstream(dir / "SHA256SUMS") << kept; }
  EXPECT_NE(load_error(dir).find("optimizer.safetensors: missing"), std::string::npos) << load_error(dir);
  // A model-only load (evaluate, generate) verifies and returns the model.
  auto ck = zcode::ckpt::load_checkpoint(dir, zcode::ckpt::Parts::kModelOnly);
  EXPECT_EQ(ck.step, 4u);
  ASSERT_NE(ck.model, nullptr);
  const auto* t = ck.model->find("embed.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(reinterpret_cast<const float*>(t->data)[1], 41.0f);  // contents(): step * 10 + i
  EXPECT_EQ(ck.optimizer, nullptr);
  // It still verifies what it reads.
  {
    std::fstream f(dir / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x55');
  }
  try {
    zcode::ckpt::load_checkpoint(dir, zcode::ckpt::Parts::kModelOnly);
    ADD_FAILURE() << "a modified model file was accepted";
  } catch (const CheckpointError& e2) {
    EXPECT_NE(std::string(e2.what()).find("model.safetensors: SHA-256 mismatch"), std::string::npos) << e2.what();
  }
  fs::remove_all(root);
}

TEST(Checkpoint, StepMustMatchTheFolderName) {
  fs::path root = fresh_dir("renamed");
  fs::path dir = zcode::ckpt::write_checkpoint(root, contents(6), 0);
  fs::rename(dir, root / "step_60");
  const std::string e = load_error(root / "step_60");
  EXPECT_NE(
      e.find((root / "step_60" / "state.json").string() + ": step 6 disagrees with the folder name step_60 (step 60)"),
      std::string::npos)
      << e;
  // A trailing slash names the same folder.
  EXPECT_NE(load_error((root / "step_60").string() + "/").find("disagrees"), std::string::npos);
  // Under a name that is not step_N (a copy kept aside) it loads.
  fs::rename(root / "step_60", root / "best");
  EXPECT_EQ(load_error(root / "best"), "");
  fs::remove_all(root);
}

}  // namespace

// A re-save of step N moves step_N to `.old-step_N-PID`, then renames its
// complete new copy `.tmp-step_N-PID` into place: a kill between the two
// leaves no step_N. The next start puts the old copy back (it was a complete
// checkpoint) before the temp folder goes; an `.old-` whose step_N exists is
// only the replaced copy, and goes.
TEST(Checkpoint, KilledReSaveRestoresTheSetAsideStep) {
  fs::path root = fresh_dir("resave");
  zcode::ckpt::write_checkpoint(root, contents(2), 0);
  zcode::ckpt::write_checkpoint(root, contents(3), 0);
  auto read_all = [](const fs::path& f) {
    std::ifstream in(f, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string original = read_all(root / "step_2" / "model.safetensors");
  pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);  // a PID that runs nothing: the killed writer
  const std::string pid = std::to_string(child);
  // The state at the kill: step_2 set aside, the new copy complete in .tmp-.
  const fs::path other = fresh_dir("resave_new");
  zcode::ckpt::write_checkpoint(other, contents(2, 8), 0);
  const fs::path old2 = root / (".old-step_2-" + pid), tmp2 = root / (".tmp-step_2-" + pid);
  fs::rename(root / "step_2", old2);
  fs::rename(other / "step_2", tmp2);
  // And a replaced copy of step_3 whose new step_3 is in place.
  const fs::path old3 = root / (".old-step_3-" + pid);
  fs::copy(root / "step_3", old3);
  ASSERT_FALSE(fs::exists(root / "step_2"));

  zcode::ckpt::SetAsideCleanup set_aside;
  EXPECT_EQ(zcode::ckpt::remove_stale_temp_folders(root, &set_aside), (std::vector<fs::path>{tmp2}));
  ASSERT_EQ(set_aside.restored.size(), 1u);
  EXPECT_EQ(set_aside.restored[0].first, old2);
  EXPECT_EQ(set_aside.restored[0].second, root / "step_2");
  EXPECT_EQ(set_aside.removed, (std::vector<fs::path>{old3}));
  EXPECT_EQ(load_error(root / "step_2"), "");
  EXPECT_EQ(read_all(root / "step_2" / "model.safetensors"), original);
  EXPECT_EQ(load_error(root / "step_3"), "");
  for (const auto& p : {old2, tmp2, old3}) EXPECT_FALSE(fs::exists(p)) << p;
  EXPECT_EQ(zcode::ckpt::list_checkpoints(root).size(), 2u);
  fs::remove_all(root);
  fs::remove_all(other);
}
