#!/usr/bin/env python3
"""cmake/git_commit.cmake, the build-time stamp of the git commit.

The commit in `zcode-host --version`, run folders, checkpoints and the ranks'
same-build check is read at every build, so an incremental build after a
commit must not keep the old one. Checked against a scratch git repository
whose commit the test reads with git itself:
  - a clean checkout: `git rev-parse --short=12 HEAD`;
  - run again unchanged: the file is not rewritten (same mtime, so nothing
    that depends on it rebuilds);
  - a tracked file changed: "<commit>-dirty"; an untracked file alone: clean;
  - a new commit: the new hash;
  - a folder outside any git checkout: "unknown"; a folder inside the scratch
    repository (a tarball unpacked in someone's checkout): "unknown" too;
  - a touched but unchanged tracked file: clean, and .git/index untouched
    (no lock taken at every build);
and the built zcode-host prints the commit of the build tree's generated file.

Usage: git_commit_test.py CMAKE SCRIPT ZCODE_HOST GENERATED_CPP
"""
import os
import re
import subprocess
import sys
import tempfile

cmake, script, host, generated = sys.argv[1:5]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def git(repo, *args):
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    return subprocess.run(["git", "-C", repo, "-c", "commit.gpgsign=false", *args], check=True, capture_output=True,
                          text=True, env=env).stdout.strip()


def stamp(src, out):
    # git looks no higher than the scratch folder's parent (/tmp itself might be in a checkout).
    env = dict(os.environ, GIT_CEILING_DIRECTORIES=os.path.dirname(os.path.dirname(out)))
    subprocess.run([cmake, f"-DSOURCE_DIR={src}", f"-DOUTPUT={out}", "-P", script], check=True, env=env)
    m = re.search(r'return "([^"]*)";', open(out).read())
    return m.group(1) if m else None


with tempfile.TemporaryDirectory() as tmp:
    repo = os.path.join(tmp, "repo")
    os.makedirs(repo)
    git(repo, "init", "-q")
    with open(os.path.join(repo, "a.txt"), "w") as f:
        f.write("one\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-q", "-m", "first")
    first = git(repo, "rev-parse", "HEAD")
    out = os.path.join(tmp, "git_commit.cpp")

    got = stamp(repo, out)
    check(got == first[:12], f"clean checkout: {got!r}, expected {first[:12]!r}")
    before = os.stat(out).st_mtime_ns
    os.utime(out, ns=(before - 10**9, before - 10**9))  # a second older: a rewrite would show
    before = os.stat(out).st_mtime_ns
    check(stamp(repo, out) == first[:12] and os.stat(out).st_mtime_ns == before,
          "an unchanged commit rewrote the file")

    index = os.path.join(repo, ".git", "index")
    index_before = os.stat(index).st_mtime_ns
    later = index_before + 5 * 10**9  # touched, content unchanged: the index's stat cache no longer matches
    os.utime(os.path.join(repo, "a.txt"), ns=(later, later))
    got = stamp(repo, out)
    check(got == first[:12], f"a touched, unchanged file: {got!r}, expected {first[:12]!r}")
    check(os.stat(index).st_mtime_ns == index_before, "the stamp rewrote .git/index")

    with open(os.path.join(repo, "b.txt"), "w") as f:
        f.write("untracked\n")
    got = stamp(repo, out)
    check(got == first[:12], f"an untracked file alone: {got!r}, expected {first[:12]!r}")
    with open(os.path.join(repo, "a.txt"), "w") as f:
        f.write("two\n")
    got = stamp(repo, out)
    check(got == first[:12] + "-dirty", f"a changed tracked file: {got!r}, expected {first[:12]}-dirty")

    git(repo, "commit", "-q", "-am", "second")
    second = git(repo, "rev-parse", "HEAD")
    got = stamp(repo, out)
    check(second != first and got == second[:12], f"a new commit: {got!r}, expected {second[:12]!r}")

    plain = os.path.join(tmp, "plain")
    os.makedirs(plain)
    got = stamp(plain, out)
    check(got == "unknown", f"outside a git checkout: {got!r}, expected 'unknown'")
    nested = os.path.join(repo, "unpacked")
    os.makedirs(nested)
    got = stamp(nested, out)
    check(got == "unknown", f"a folder inside another checkout: {got!r}, expected 'unknown'")

built = re.search(r'return "([^"]*)";', open(generated).read()).group(1)
version = subprocess.run([host, "--version"], check=True, capture_output=True, text=True).stdout
check(f"git commit {built}\n" in version, f"zcode-host --version does not name {built!r}:\n{version}")

if failures:
    sys.exit(1)
print("OK")
