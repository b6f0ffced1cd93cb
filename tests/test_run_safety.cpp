// Never losing a run: `gdn train` into a directory that holds a run is refused (naming --resume
// and --overwrite), --overwrite and --resume work; checkpoint pruning keeps what `latest` names;
// failed writes (a full disk: /dev/full, a file size limit, a directory in a file's place) stop
// with an error naming the file and never replace a good file; SIGTERM, SIGHUP and SIGINT save at
// the end of the step and exit with 128 + N, and the checkpoint resumes; trainer_state.json
// fields are validated. The `gdn` program runs as a child process: the one beside this test's
// build directory (build/gdn for build/tests/test_run_safety), or $GDN_BINARY.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "src/io/atomic_file.h"
#include "src/train/checkpoint.h"
#include "src/train/metrics.h"
#include "tests/test_helpers.h"
#include "tests/tiny_runs.h"

namespace gdn {
namespace {

namespace fs = std::filesystem;

using test::error_of;
using test::gdn_binary;
using test::read_file;
using test::TempDir;
using test::write_file;

// A child process (`gdn` by default), its stdout and stderr in files of `dir` (through a pipe
// when its file size is limited, since the limit would cut its own messages short).
struct Gdn {
  pid_t pid = -1;
  std::string out, err;
  int pipe_fd = -1;  // the read end, with a file size limit
  bool reaped = false;
  std::string piped;

  // Starts `gdn args...`; with fsize_limit >= 0 no file it writes may grow beyond that many bytes
  // (a full disk without mounting one: writes past it fail with EFBIG).
  // With `program`, `program args...` instead.
  Gdn(const std::vector<std::string>& args, const std::string& dir, long fsize_limit = -1,
      const std::string& program = "") {
    static int counter = 0;
    const std::string tag = std::to_string(counter++);
    out = dir + "/gdn" + tag + ".out";
    err = dir + "/gdn" + tag + ".err";
    std::vector<std::string> all = {program.empty() ? gdn_binary() : program};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    int fds[2] = {-1, -1};
    if (fsize_limit >= 0 && pipe(fds) != 0) return;
    pid = fork();
    if (pid == 0) {  // only async-signal-safe calls until exec
      if (fsize_limit >= 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        signal(SIGXFSZ, SIG_IGN);  // a write past the limit fails instead of killing
        struct rlimit r {};
        getrlimit(RLIMIT_FSIZE, &r);
        r.rlim_cur = rlim_t(fsize_limit);
        setrlimit(RLIMIT_FSIZE, &r);
      } else {
        dup2(open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 1);
        dup2(open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 2);
      }
      execv(argv[0], argv.data());
      _exit(127);
    }
    if (fsize_limit >= 0) {
      close(fds[1]);
      pipe_fd = fds[0];
      fcntl(pipe_fd, F_SETFL, O_NONBLOCK);
    }
  }

  // A child a failed assertion left running is stopped (mpirun passes SIGTERM to its ranks).
  ~Gdn() {
    if (pid > 0 && !reaped) {
      kill(pid, SIGTERM);
      wait(30);
    }
  }
  Gdn(const Gdn&) = delete;
  Gdn& operator=(const Gdn&) = delete;

  // The exit status; 256 + N when killed by signal N (unlike exiting with 128 + N), -1 after a
  // timeout.
  int wait(double timeout_s = 120) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    int code = -1;
    for (;;) {
      drain();
      int status = 0;
      const pid_t r = waitpid(pid, &status, WNOHANG);
      if (r < 0) {  // no such child (fork failed): code stays -1
        reaped = true;
        break;
      }
      if (r == pid) {
        reaped = true;
        code = WIFEXITED(status) ? WEXITSTATUS(status) : 256 + WTERMSIG(status);
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        reaped = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (pipe_fd >= 0) {
      drain();
      close(pipe_fd);
      pipe_fd = -1;
      write_file(err, piped);
    }
    return code;
  }
  void drain() {
    char buf[4096];
    ssize_t n;
    while (pipe_fd >= 0 && (n = read(pipe_fd, buf, sizeof buf)) > 0) piped.append(buf, size_t(n));
  }
  std::string stdout_text() const { return read_file(out); }
  std::string stderr_text() const { return read_file(err); }
};

// Runs `gdn args...` to the end; returns its exit status.
int run_gdn(const std::vector<std::string>& args, const std::string& dir,
            std::string* err = nullptr, std::string* out = nullptr, long fsize_limit = -1) {
  Gdn g(args, dir, fsize_limit);
  const int code = g.wait();
  if (err) *err = g.stderr_text();
  if (out) *out = g.stdout_text();
  return code;
}

// Writes tiny.yaml into ROOT and returns its path: the tiny text run of the trainer tests
// (tests/tiny_runs.h) on the corpus in ROOT/corpus, into ROOT/run, `steps` steps, a checkpoint
// every 2 steps, the 2 newest kept, no validation.
std::string write_tiny_config(const std::string& root, int64_t steps = 4) {
  test::write_tiny_corpus(fs::path(root) / "corpus");
  const std::string path = root + "/tiny.yaml";
  write_file(path, test::model_yaml({32, 2, 2, 16, 256, 16}) +
                       "data:\n  seq_len: 24\n  val_fraction: 0.2\n  inputs: [" + root +
                       "/corpus]\ntrain:\n  steps: " + std::to_string(steps) +
                       "\n  batch_size: 2\n  lr: 3.0e-3\n  warmup_steps: 2\n  eval_every: 0\n"
                       "  save_every: 2\n  keep_checkpoints: 2\n  log_every: 1\n  seed: 3\n"
                       "  device: cpu\n  out_dir: " +
                       root + "/run\n");
  return path;
}

// The steps of the training records of RUN_DIR/metrics.jsonl, in file order.
std::vector<int64_t> logged_steps(const std::string& run_dir) {
  std::vector<int64_t> steps;
  std::ifstream f(fs::path(run_dir) / "metrics.jsonl");
  std::string line;
  while (std::getline(f, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) steps.push_back(j["step"]);
  }
  return steps;
}

std::vector<int64_t> steps_1_to(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t s = 1; s <= n; ++s) v.push_back(s);
  return v;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

#define ASSERT_GDN_BUILT()                                                                 \
  ASSERT_NE(gdn_binary(), "") << "no gdn program beside this test's build directory; set " \
                                 "GDN_BINARY"

TEST(RunSafety, TrainingTwiceIntoOneDirectoryIsRefusedResumeAndOverwriteWork) {
  ASSERT_GDN_BUILT();
  TempDir dir("gdn_run_safety_twice");
  const std::string root = dir.path.string(), run = root + "/run";
  const std::string cfg = write_tiny_config(root);
  std::string err, out;
  ASSERT_EQ(run_gdn({"train", cfg, "--quiet"}, root, &err), 0) << err;
  const std::string metrics = read_file(run + "/metrics.jsonl"),
                    latest = read_file(run + "/latest");
  EXPECT_EQ(latest, "step-000004\n");

  // Again into the same directory: refused, nothing touched.
  EXPECT_EQ(run_gdn({"train", cfg, "--quiet"}, root, &err), 1);
  for (const std::string& part :
       std::vector<std::string>{"already holds a run", "--resume", "--overwrite", run})
    EXPECT_TRUE(contains(err, part)) << part << " not in: " << err;
  EXPECT_EQ(read_file(run + "/metrics.jsonl"), metrics);
  EXPECT_EQ(read_file(run + "/latest"), latest);
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step-000004/model.safetensors"));

  // --resume continues it (a longer run): every step logged once.
  ASSERT_EQ(run_gdn({"train", cfg, "--quiet", "--resume", run, "--set", "train.steps=6"}, root,
                    &err, &out),
            0)
      << err;
  EXPECT_EQ(nlohmann::json::parse(out)["step"], 6);
  EXPECT_EQ(logged_steps(run), steps_1_to(6));

  // --overwrite with --resume is contradictory.
  EXPECT_EQ(run_gdn({"train", cfg, "--quiet", "--overwrite", "--resume", run}, root, &err), 1);
  EXPECT_TRUE(contains(err, "--overwrite") && contains(err, "--resume")) << err;

  // --overwrite starts afresh: the old checkpoints and metrics are gone, the data stays.
  ASSERT_EQ(run_gdn({"train", cfg, "--quiet", "--overwrite", "--set", "train.steps=2"}, root, &err),
            0)
      << err;
  EXPECT_EQ(read_file(run + "/latest"), "step-000002\n");
  std::vector<std::string> checkpoints;
  for (const auto& e : fs::directory_iterator(run + "/checkpoints"))
    checkpoints.push_back(e.path().filename().string());
  EXPECT_EQ(checkpoints, std::vector<std::string>{"step-000002"});
  EXPECT_EQ(logged_steps(run), steps_1_to(2));
  EXPECT_TRUE(fs::exists(run + "/data/meta.json"));
  EXPECT_TRUE(fs::exists(train::resolve_checkpoint(run)));
}

// One run, one owner (src/io/run_lock.h): two trainers started together into one directory,
// at any offset: exactly one trains, the other exits 1 naming the directory and the holder, and
// metrics.jsonl has each step once. The same for two --resume of one run, and --overwrite of a
// run being trained is refused.
TEST(RunSafety, TwoProcessesInOneRunDirectoryOneTrains) {
  ASSERT_GDN_BUILT();
  TempDir dir("gdn_run_safety_lock");
  const std::string root = dir.path.string(), run = root + "/run";
  const std::string cfg = write_tiny_config(root, 30);
  // Started together; then one started once the first has written its first record.
  for (bool offset : {false, true}) {
    SCOPED_TRACE(offset ? "second started after the first's first step" : "started together");
    fs::remove_all(run);
    Gdn first({"train", cfg, "--quiet"}, root);
    if (offset)
      for (int i = 0; i < 1000 && logged_steps(run).empty(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    Gdn second({"train", cfg, "--quiet"}, root);
    const int a = first.wait(), b = second.wait();
    EXPECT_EQ((a == 0) + (b == 0), 1) << "exit statuses " << a << " and " << b;
    const std::string refused = a == 0 ? second.stderr_text() : first.stderr_text();
    EXPECT_TRUE(contains(refused, "the run directory " + run + " is in use by another process") ||
                contains(refused, "already holds a run"))
        << refused;
    EXPECT_EQ(logged_steps(run), steps_1_to(30));
  }
  // The first is training: a second --overwrite is refused naming the holder's pid and host.
  {
    fs::remove_all(run);
    Gdn first({"train", cfg, "--quiet", "--set", "train.steps=400"}, root);
    for (int i = 0; i < 1000 && logged_steps(run).empty(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::string err;
    EXPECT_EQ(run_gdn({"train", cfg, "--quiet", "--overwrite"}, root, &err), 1);
    EXPECT_TRUE(contains(err, "is in use by another process (pid ")) << err;
    EXPECT_TRUE(contains(err, "gdn train)")) << err;
    kill(first.pid, SIGINT);  // saves and stops
    EXPECT_EQ(first.wait(), 128 + SIGINT);
  }
  // Two --resume of one run at once: one continues it, the other is refused.
  fs::remove_all(run);
  ASSERT_EQ(run_gdn({"train", cfg, "--quiet", "--set", "train.steps=4"}, root), 0);
  Gdn r1({"train", "--quiet", "--resume", run, "--set", "train.steps=30"}, root);
  Gdn r2({"train", "--quiet", "--resume", run, "--set", "train.steps=30"}, root);
  const int a = r1.wait(), b = r2.wait();
  EXPECT_EQ((a == 0) + (b == 0), 1) << "exit statuses " << a << " and " << b;
  EXPECT_EQ(logged_steps(run), steps_1_to(30));
}

// A resume continues the same model on the same tokens: a --set that changes the model, the run's
// data.tokenizer or data.inputs, or a data.dir whose tokenizer is not the checkpoint's, is refused
// naming both sides; a data.dir of the same tokenizer (more text) resumes.
TEST(RunSafety, AResumeContinuesTheSameModelOnTheSameTokens) {
  ASSERT_GDN_BUILT();
  TempDir dir("gdn_run_safety_same_run");
  const std::string root = dir.path.string(), run = root + "/run";
  const std::string cfg = write_tiny_config(root);
  std::string err;
  ASSERT_EQ(run_gdn({"train", cfg, "--quiet"}, root, &err), 0) << err;
  const std::string resume_to_6[] = {"train", "--quiet", "--resume", run, "--set", "train.steps=6"};
  const auto resume_with = [&](const std::string& set) {
    std::vector<std::string> args(std::begin(resume_to_6), std::end(resume_to_6));
    args.insert(args.end(), {"--set", set});
    return run_gdn(args, root, &err);
  };
  EXPECT_EQ(resume_with("model.norm_eps=0.1"), 1);
  EXPECT_TRUE(contains(err, "norm_eps (0.1 vs 1e-06)")) << err;
  EXPECT_EQ(resume_with("data.tokenizer=sentencepiece"), 1);
  EXPECT_TRUE(contains(err, "says tokenizer 'byte', the config says data.tokenizer: sentencepiece"))
      << err;
  EXPECT_EQ(resume_with("data.inputs=[" + root + "]"), 1);
  EXPECT_TRUE(contains(
      err, "was prepared from data.inputs [" + root + "/corpus], the config says [" + root + "]"))
      << err;
  EXPECT_EQ(logged_steps(run), steps_1_to(4)) << "a refused resume wrote to the run";

  // Other text through the same (byte) tokenizer: the run continues on it.
  test::write_corpus(fs::path(root) / "other", 2, 80, [](int f, int i) {
    return "other words " + std::to_string(f * 1000 + i * 7) + ": lorem ipsum dolor sit amet";
  });
  ASSERT_EQ(run_gdn({"prepare-data", "--input", root + "/other", "--val-fraction", "0.3", "--out",
                     root + "/byte_other"},
                    root, &err),
            0)
      << err;
  EXPECT_EQ(resume_with("data.dir=" + root + "/byte_other"), 0) << err;
  EXPECT_EQ(logged_steps(run), steps_1_to(6));

  // Two SentencePiece tokenizers of one vocabulary size, trained on other text.
  for (const auto& [input, out] : std::vector<std::pair<std::string, std::string>>{
           {root + "/corpus", root + "/sp_a"}, {root + "/other", root + "/sp_b"}})
    ASSERT_EQ(run_gdn({"prepare-data", "--input", input, "--tokenizer", "sentencepiece",
                       "--vocab-size", "300", "--val-fraction", "0.3", "--out", out},
                      root, &err),
              0)
        << err;
  ASSERT_EQ(run_gdn({"train", cfg, "--quiet", "--overwrite", "--set", "data.dir=" + root + "/sp_a",
                     "--set", "model.vocab_size=300"},
                    root, &err),
            0)
      << err;
  EXPECT_EQ(resume_with("data.dir=" + root + "/sp_b"), 1);
  EXPECT_TRUE(contains(err, "the data's tokenizer is sentencepiece (vocab 300") &&
              contains(err, "the checkpoint was trained on sentencepiece (vocab 300"))
      << err;
}

TEST(RunSafety, ARunWithoutACheckpointIsRefusedToo) {
  ASSERT_GDN_BUILT();
  TempDir dir("gdn_run_safety_no_checkpoint");
  const std::string root = dir.path.string(), run = root + "/run";
  const std::string cfg = write_tiny_config(root);
  fs::create_directories(run);
  const std::string metrics = "{\"step\":1,\"loss\":5.0}\n";  // died before its first save
  write_file(run + "/metrics.jsonl", metrics);
  std::string err;
  EXPECT_EQ(run_gdn({"train", cfg, "--quiet"}, root, &err), 1);
  for (const char* part : {"no checkpoint yet", "--resume", "--overwrite"})
    EXPECT_TRUE(contains(err, part)) << part << " not in: " << err;
  EXPECT_EQ(read_file(run + "/metrics.jsonl"), metrics);
}

TEST(RunSafety, PruningNeverDeletesTheCheckpointLatestNames) {
  TempDir dir("gdn_run_safety_prune");
  const std::string run = dir.path.string();
  for (const char* name :
       {"step-000001", "step-000002", "step-000003", "step-1000000", "step-000004.partial"})
    fs::create_directories(dir.path / "checkpoints" / name);
  // A fresh run's checkpoint among an old run's newer ones (what the issue saw).
  write_file(run + "/latest", "step-000001\n");
  train::prune_checkpoints(run, 1);
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step-000001"));
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step-1000000"));  // the newest by step, not by name
  EXPECT_FALSE(fs::exists(run + "/checkpoints/step-000002"));
  EXPECT_FALSE(fs::exists(run + "/checkpoints/step-000003"));
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step-000004.partial"));  // not a checkpoint
}

TEST(RunSafety, WhatCountsAsARun) {
  TempDir dir("gdn_run_safety_traces");
  const std::string run = dir.path.string();
  fs::create_directories(dir.path / "data");
  write_file(run + "/config.yaml", "model: {}\n");
  write_file(run + "/metrics.jsonl", "");
  EXPECT_TRUE(train::run_traces(run).empty());  // prepared data and a run that never logged
  write_file(run + "/metrics.jsonl", "{\"step\": 1, \"loss\": 2.0}\n");
  EXPECT_EQ(train::run_traces(run), std::vector<std::string>{"metrics.jsonl"});
  fs::create_directories(dir.path / "checkpoints" / "step-000002");
  write_file(run + "/latest", "step-000002\n");
  EXPECT_EQ(train::run_traces(run),
            (std::vector<std::string>{"latest (step-000002)", "checkpoints/", "metrics.jsonl"}));
  train::remove_run(run);
  EXPECT_TRUE(train::run_traces(run).empty());
  EXPECT_TRUE(fs::exists(dir.path / "data"));
  EXPECT_FALSE(fs::exists(dir.path / "config.yaml"));
}

TEST(RunSafety, AFullDiskStopsTheRunNamingMetricsJsonl) {
  ASSERT_GDN_BUILT();
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  TempDir dir("gdn_run_safety_full");
  const std::string root = dir.path.string(), run = root + "/run";
  const std::string cfg = write_tiny_config(root);
  fs::create_directories(run);
  fs::create_symlink("/dev/full", run + "/metrics.jsonl");  // every write: ENOSPC
  std::string err;
  EXPECT_EQ(run_gdn({"train", cfg, "--quiet"}, root, &err), 1);
  EXPECT_TRUE(contains(err, run + "/metrics.jsonl")) << err;
  EXPECT_TRUE(contains(err, "No space left on device")) << err;
  EXPECT_FALSE(fs::exists(run + "/checkpoints/step-000002"));  // stopped at the first log
}

TEST(RunSafety, AResumeOnAFullDiskKeepsTheGoodMetricsJsonl) {
  ASSERT_GDN_BUILT();
  TempDir dir("gdn_run_safety_resume_full");
  const std::string root = dir.path.string(), run = root + "/run";
  const std::string cfg = write_tiny_config(root);
  std::string err;
  ASSERT_EQ(run_gdn({"train", cfg, "--quiet"}, root, &err), 0) << err;
  const std::string metrics = read_file(run + "/metrics.jsonl"),
                    config = read_file(run + "/config.yaml");
  // From step 2 the metrics of steps 3 and 4 go: a rewrite, which the file size limit fails.
  EXPECT_EQ(run_gdn({"train", "--quiet", "--resume", run + "/checkpoints/step-000002"}, root, &err,
                    nullptr, 64),
            1);
  EXPECT_TRUE(contains(err, run + "/metrics.jsonl")) << err;
  EXPECT_TRUE(contains(err, "File too large")) << err;
  EXPECT_EQ(read_file(run + "/metrics.jsonl"), metrics);  // the good file, whole
  EXPECT_EQ(read_file(run + "/config.yaml"), config);
  for (const auto& e : fs::directory_iterator(run))  // no temporary of the child's left
    EXPECT_NE(e.path().filename().string().rfind("metrics.jsonl.tmp", 0), 0u) << e.path();
  // With room again, the same resume truncates and continues.
  ASSERT_EQ(run_gdn({"train", "--quiet", "--resume", run + "/checkpoints/step-000002"}, root, &err),
            0)
      << err;
  EXPECT_EQ(logged_steps(run), steps_1_to(4));
}

TEST(RunSafety, AFailedCheckpointKeepsTheOldOneAndLatest) {
  ASSERT_GDN_BUILT();
  TempDir dir("gdn_run_safety_checkpoint_full");
  const std::string root = dir.path.string(), run = root + "/run";
  const std::string cfg = write_tiny_config(root);
  std::string err;
  ASSERT_EQ(run_gdn({"train", cfg, "--quiet"}, root, &err), 0) << err;
  const std::string state = read_file(run + "/checkpoints/step-000004/trainer_state.json");
  const std::string weights = read_file(run + "/checkpoints/step-000004/model.safetensors");
  // Again from step 2: the metrics fit under the limit, the weights of step 4 (300 kB) do not.
  EXPECT_EQ(run_gdn({"train", "--quiet", "--resume", run + "/checkpoints/step-000002"}, root, &err,
                    nullptr, 100000),
            1);
  EXPECT_TRUE(contains(err, "cannot save the checkpoint of step 4")) << err;
  EXPECT_TRUE(contains(err, "model.safetensors")) << err;
  EXPECT_EQ(read_file(run + "/latest"), "step-000004\n");
  EXPECT_EQ(read_file(run + "/checkpoints/step-000004/trainer_state.json"), state);
  EXPECT_EQ(read_file(run + "/checkpoints/step-000004/model.safetensors"), weights);
  for (const auto& e : fs::directory_iterator(run + "/checkpoints"))
    EXPECT_EQ(train::checkpoint_path(run, train::load_trainer_state(e.path().string()).step),
              e.path().string());  // whole checkpoints only, no temporaries
}

// The file size limit of this process, lowered for one scope (writes past it fail with EFBIG).
struct FileSizeLimit {
  struct rlimit saved {};
  void (*saved_handler)(int);
  explicit FileSizeLimit(rlim_t bytes) : saved_handler(signal(SIGXFSZ, SIG_IGN)) {
    getrlimit(RLIMIT_FSIZE, &saved);
    struct rlimit r = saved;
    r.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &r);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved);
    signal(SIGXFSZ, saved_handler);
  }
};

TEST(RunSafety, MetricsLogWritesAreCheckedAndRewritesAreAtomic) {
  TempDir dir("gdn_run_safety_metrics");
  const std::string path = dir.file("metrics.jsonl");
  const std::string good =
      "{\"step\":1,\"loss\":3.0}\n{\"step\":2,\"loss\":2.5}\n"
      "{\"step\":3,\"loss\":2.0}\n{\"step\":4,\"lo";  // torn last line
  EXPECT_EQ(train::metrics_kept_through(good, 2),
            "{\"step\":1,\"loss\":3.0}\n{\"step\":2,\"loss\":2.5}\n");
  EXPECT_EQ(train::metrics_kept_through(good, 3), good.substr(0, good.rfind('\n') + 1));
  write_file(path, good);
  {
    const FileSizeLimit limit(16);
    const std::string e = error_of([&] { train::MetricsLog log(path, 2); });
    EXPECT_TRUE(contains(e, path) && contains(e, "File too large")) << e;
  }
  EXPECT_EQ(read_file(path), good);
  EXPECT_FALSE(fs::exists(io::temp_path_for(path)));
  // A directory where the temporary goes: the rewrite fails, the file stays.
  fs::create_directories(io::temp_path_for(path));
  EXPECT_TRUE(contains(error_of([&] { train::MetricsLog log(path, 2); }), io::temp_path_for(path)));
  EXPECT_EQ(read_file(path), good);
  fs::remove(io::temp_path_for(path));
  {
    train::MetricsLog log(path, 2);
    log.write({{"step", 3}, {"loss", 1.5}});
  }
  EXPECT_EQ(read_file(path),
            "{\"step\":1,\"loss\":3.0}\n{\"step\":2,\"loss\":2.5}\n{\"loss\":1.5,\"step\":3}\n");
  // An append past the limit fails naming the file and leaves no torn line.
  {
    train::MetricsLog log(path);
    const std::string before = read_file(path);
    const FileSizeLimit limit(before.size() + 10);
    const std::string e = error_of([&] { log.write({{"step", 4}, {"loss", 1.25}}); });
    EXPECT_TRUE(contains(e, path) && contains(e, "File too large")) << e;
    EXPECT_EQ(read_file(path), before);
  }
  // A metrics.jsonl that is not a regular file is never read forever or rewritten.
  if (fs::exists("/dev/full")) {
    const std::string link = dir.file("full.jsonl");
    fs::create_symlink("/dev/full", link);
    EXPECT_TRUE(contains(error_of([&] { train::MetricsLog log(link, 2); }), "not a regular file"));
    train::MetricsLog log(link);
    const std::string e = error_of([&] { log.write({{"step", 1}}); });
    EXPECT_TRUE(contains(e, link) && contains(e, "No space left on device")) << e;
  }
}

TEST(RunSafety, AtomicWritesKeepTheOldFileOnFailure) {
  TempDir dir("gdn_run_safety_atomic");
  const std::string path = dir.file("config.yaml");
  write_file(path, "old\n");
  {
    const FileSizeLimit limit(8);
    const std::string e = error_of([&] { io::write_file_atomic(path, std::string(100, 'x')); });
    EXPECT_TRUE(contains(e, path) && contains(e, "File too large")) << e;
  }
  EXPECT_EQ(read_file(path), "old\n");
  EXPECT_FALSE(fs::exists(io::temp_path_for(path)));
  // A stale temporary that is a link is replaced, never written through.
  const std::string other = dir.file("other");
  write_file(other, "keep\n");
  fs::create_symlink(other, io::temp_path_for(path));
  io::write_file_atomic(path, "new\n");
  EXPECT_EQ(read_file(path), "new\n");
  EXPECT_EQ(read_file(other), "keep\n");
  // A directory in the file's place: the error names it.
  fs::create_directories(dir.path / "adir");
  EXPECT_TRUE(
      contains(error_of([&] { io::write_file_atomic(dir.file("adir"), "x"); }), dir.file("adir")));
}

// Starts a long run, sends `sig` after its first logged steps; expects exit 128 + sig, a
// checkpoint at the step it stopped at, and a resume from it.
void expect_signal_saves(int sig) {
  ASSERT_GDN_BUILT();
  TempDir dir("gdn_run_safety_signal");
  const std::string root = dir.path.string(), run = root + "/run";
  const std::string cfg = write_tiny_config(root, 1000000);
  Gdn g({"train", cfg, "--quiet", "--set", "train.save_every=0"}, root);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (logged_steps(run).size() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_GE(logged_steps(run).size(), 2u) << g.stderr_text();
  kill(g.pid, sig);
  ASSERT_EQ(g.wait(), 128 + sig) << g.stderr_text();
  const int64_t step = logged_steps(run).back();
  EXPECT_EQ(train::resolve_checkpoint(run), train::checkpoint_path(run, step));
  EXPECT_EQ(train::load_trainer_state(train::checkpoint_path(run, step)).step, step);
  EXPECT_EQ(nlohmann::json::parse(g.stdout_text())["step"], step);
  std::string err, out;
  ASSERT_EQ(run_gdn({"train", "--quiet", "--resume", run, "--set",
                     "train.steps=" + std::to_string(step + 2)},
                    root, &err, &out),
            0)
      << err;
  EXPECT_EQ(nlohmann::json::parse(out)["step"], step + 2);
  EXPECT_EQ(logged_steps(run), steps_1_to(step + 2));
}

TEST(RunSafety, SigtermSavesAndExits143) {
  expect_signal_saves(SIGTERM);
}
TEST(RunSafety, SighupSavesAndExits129) {
  expect_signal_saves(SIGHUP);
}
TEST(RunSafety, SigintSavesAndExits130) {
  expect_signal_saves(SIGINT);
}

// The processes whose parent is `parent` (from /proc).
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;  // not a process
    const std::string stat = read_file((e.path() / "stat").string());
    const size_t close = stat.rfind(')');  // "pid (comm) state ppid ..."
    if (close == std::string::npos) continue;
    char state = 0;
    long ppid = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %c %ld", &state, &ppid) == 2 && ppid == parent)
      out.push_back(pid_t(std::stol(name)));
  }
  return out;
}

// Data-parallel: SIGTERM to one rank stops both at the same step, rank 0 saves, every rank
// exits 143.
TEST(RunSafety, ASignalToOneRankStopsEveryRankAtTheSameStep) {
  ASSERT_GDN_BUILT();
  std::string mpirun;
  for (const char* dir : {"/usr/bin", "/usr/local/bin"})
    if (fs::exists(std::string(dir) + "/mpirun")) mpirun = std::string(dir) + "/mpirun";
  if (mpirun.empty()) GTEST_SKIP() << "no mpirun";
  TempDir dir("gdn_run_safety_mpi");
  const std::string root = dir.path.string(), run = root + "/run";
  const std::string cfg = write_tiny_config(root, 1000000);
  Gdn g({"-np", "2", "--allow-run-as-root", "--oversubscribe", gdn_binary(), "train", cfg,
         "--quiet", "--set", "train.save_every=0", "--set", "dist.timeout_s=60"},
        root, -1, mpirun);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  std::vector<pid_t> ranks;
  while ((logged_steps(run).size() < 2 || ranks.size() < 2) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ranks = children_of(g.pid);
  }
  ASSERT_GE(logged_steps(run).size(), 2u) << g.stderr_text();
  ASSERT_EQ(ranks.size(), 2u);
  kill(*std::max_element(ranks.begin(), ranks.end()), SIGTERM);  // one rank only
  ASSERT_EQ(g.wait(), 143) << g.stderr_text();
  const int64_t step = logged_steps(run).back();
  EXPECT_EQ(train::resolve_checkpoint(run), train::checkpoint_path(run, step));
  const train::TrainerState s = train::load_trainer_state(train::checkpoint_path(run, step));
  EXPECT_EQ(s.step, step);
  EXPECT_EQ(s.world_size, 2);
  EXPECT_EQ(nlohmann::json::parse(g.stdout_text())["step"], step);
}

TEST(RunSafety, TrainerStateFieldsAreValidated) {
  TempDir dir("gdn_run_safety_state");
  const std::string path = dir.file("trainer_state.json");
  const nlohmann::json good = {{"step", 6},
                               {"tokens_seen", 600},
                               {"data_step", 12},
                               {"seed", 3},
                               {"best_val_loss", 2.5},
                               {"skipped_steps", 1},
                               {"elapsed_s", 1.5},
                               {"world_size", 2},
                               {"global_batch", 4},
                               {"format", "gdn-trainer-state-1"}};
  write_file(path, good.dump());
  const train::TrainerState s = train::load_trainer_state(dir.path.string());
  EXPECT_EQ(s.step, 6);
  EXPECT_EQ(s.world_size, 2);
  EXPECT_EQ(s.seed, 3u);
  auto error_with = [&](const std::string& field, const nlohmann::json& value) {
    nlohmann::json j = good;
    if (value.is_discarded())
      j.erase(field);
    else
      j[field] = value;
    write_file(path, j.dump());
    return error_of([&] { train::load_trainer_state(dir.path.string()); });
  };
  const nlohmann::json missing = nlohmann::json::value_t::discarded;
  const std::vector<std::pair<std::string, nlohmann::json>> bad = {
      {"step", -1},         {"step", "6"},        {"step", 6.5},
      {"step", missing},    {"tokens_seen", -5},  {"data_step", nullptr},
      {"seed", -3},         {"seed", 1.5},        {"world_size", 0},
      {"world_size", "2"},  {"global_batch", -1}, {"best_val_loss", -1},
      {"elapsed_s", "1.5"}, {"skipped_steps", 7}, {"format", "gdn-trainer-state-2"},
      {"format", missing},  {"format", 1}};
  for (const auto& [field, value] : bad) {
    const std::string e = error_with(field, value);
    EXPECT_TRUE(contains(e, path) && contains(e, "'" + field + "'"))
        << field << " = " << value.dump() << ": " << e;
  }
  write_file(path, "[1, 2]");
  EXPECT_TRUE(contains(error_of([&] { train::load_trainer_state(dir.path.string()); }), path));
}

TEST(RunSafety, ACheckpointBeyondTrainStepsIsAnError) {
  ASSERT_GDN_BUILT();
  TempDir dir("gdn_run_safety_beyond");
  const std::string root = dir.path.string(), run = root + "/run";
  const std::string cfg = write_tiny_config(root);
  std::string err;
  ASSERT_EQ(run_gdn({"train", cfg, "--quiet"}, root, &err), 0) << err;
  EXPECT_EQ(run_gdn({"train", "--quiet", "--resume", run, "--set", "train.steps=3"}, root, &err),
            1);
  for (const char* part : {"trainer_state.json", "'step'", "train.steps = 3"})
    EXPECT_TRUE(contains(err, part)) << part << " not in: " << err;
}

}  // namespace
}  // namespace gdn
