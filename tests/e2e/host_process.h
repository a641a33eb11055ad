// What the end-to-end tests share: child processes (zcode-host or any program)
// started with fork/exec, its output into a file, and waited for; the tiny corpus.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace zcode::test {

struct Proc {
  pid_t pid = -1;
};

/// Starts `exe` with `args`, stdout and stderr into `log`.
inline Proc start_program(const std::filesystem::path& exe, const std::vector<std::string>& args,
                          const std::filesystem::path& log) {
  Proc p;
  p.pid = fork();
  if (p.pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(exe.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(exe.c_str(), argv.data());
    _exit(127);
  }
  return p;
}

/// Exit code, or 128 + signal.
inline int wait_for(Proc p) {
  int st = 0;
  waitpid(p.pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The end-to-end tests' tiny corpus: 60 short documents of ten words into
/// `dir`/train.jsonl and, every 6th, `dir`/val.jsonl ({"text": ...} lines).
inline void write_tiny_corpus(const std::filesystem::path& dir) {
  std::ofstream tr(dir / "train.jsonl"), va(dir / "val.jsonl");
  const char* words[] = {"alpha", "beta", "gamma", "delta", "sky", "river", "stone", "light", "the", "a"};
  for (int i = 0; i < 60; ++i) {
    std::string s;
    for (int w = 0; w < 12 + i % 7; ++w) s += std::string(w ? " " : "") + words[(i * 7 + w * 3) % 10];
    (i % 6 == 5 ? va : tr) << "{\"text\": \"" << s << ".\"}\n";
  }
}

}  // namespace zcode::test
