#include "embshard/util/python_peer.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "embshard/util/data_dir.h"
#include "embshard/util/error.h"

namespace embshard {
namespace fs = std::filesystem;

std::string torchrec_python() {
  if (const char* env = std::getenv(kTorchrecPythonEnv); env != nullptr && *env != '\0') {
    ES_CHECK(fs::exists(env), "{}={}: no such file (scripts/install_torchrec.sh makes one)",
             kTorchrecPythonEnv, env);
    return env;
  }
  std::string venv = "(no data root)";
  try {
    venv = (fs::path(data_root()) / ".venv-torchrec" / "bin" / "python").string();
    if (fs::exists(venv)) return venv;
  } catch (const Error&) {
  }
  ES_THROW("no Python with TorchRec: {} is not set and {} does not exist; run "
           "scripts/install_torchrec.sh, or set {} to a python that imports torchrec",
           kTorchrecPythonEnv, venv, kTorchrecPythonEnv);
}

namespace {

std::string last_lines(const std::string& path, int count) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::ostringstream out;
  const size_t first = lines.size() > static_cast<size_t>(count) ? lines.size() - count : 0;
  for (size_t i = first; i < lines.size(); ++i) out << "\n  " << lines[i];
  return out.str();
}

// PYTHONPATH with the source checkout's python/ folder first, when there is one.
std::string python_path() {
  std::string path;
  try {
    const fs::path source = fs::path(data_root()) / "python";
    if (fs::exists(source / "embshard" / "__init__.py")) path = source.string();
  } catch (const Error&) {
  }
  if (const char* old = std::getenv("PYTHONPATH"); old != nullptr && *old != '\0') {
    path = path.empty() ? old : path + ":" + old;
  }
  return path;
}

}  // namespace

void run_python_module(const std::string& module, const std::vector<std::string>& args,
                       const std::string& what) {
  const std::string python = torchrec_python();
  char log_template[] = "/tmp/embshard-python-XXXXXX";
  const int log_fd = mkostemp(log_template, O_CLOEXEC);  // dup2 clears it in the child
  ES_CHECK(log_fd >= 0, "{}: cannot create a log file in /tmp: {}", what, std::strerror(errno));
  const std::string log_path = log_template;
  std::vector<std::string> argv_strings = {python, "-m", module};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  const std::string pythonpath = python_path();
  // The child's environment is built before fork: between fork and exec a
  // child of a threaded process (a caller may run this on a thread, beside
  // OpenMP's) may only make async-signal-safe calls, which setenv is not.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    if (pythonpath.empty() || std::strncmp(*e, "PYTHONPATH=", 11) != 0) env_strings.push_back(*e);
  }
  if (!pythonpath.empty()) env_strings.push_back("PYTHONPATH=" + pythonpath);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  const std::string exec_failed = "cannot run " + python + "\n";

  const pid_t pid = fork();
  if (pid == 0) {
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    execve(python.c_str(), argv.data(), envp.data());
    [[maybe_unused]] const ssize_t ignored = write(STDERR_FILENO, exec_failed.data(), exec_failed.size());
    _exit(127);
  }
  close(log_fd);
  ES_CHECK(pid > 0, "{}: cannot start {}: {}", what, python, std::strerror(errno));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const std::string tail = last_lines(log_path, 15);
  fs::remove(log_path);
  ES_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "{} failed ({} -m {}: {} {}):{}", what,
           python, module, WIFEXITED(status) ? "exit status" : "signal",
           WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), tail);
}

}  // namespace embshard
