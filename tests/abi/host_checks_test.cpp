// The host checks what plugins hand back: an output allocated with another
// dtype or shape than the partition declares fails the run naming the
// plugin and the output (even when the plugin drops the host's error); a
// plugin crash during a run is reported naming the backend and partition
// before the process dies; plugins load only from safe places.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "abi_test_util.h"
#include "kiln/child_process.h"

namespace kiln::abi_test {
namespace {

namespace fs = std::filesystem;

std::string misbehaving(const std::string& name) {
  return std::string(KILN_FAKES_DIR) + "/host_checks/libkiln_fake_" + name + ".so";
}

// x float32[2, 3] -> Relu 'r' -> r_out
std::shared_ptr<ir::Graph> relu_graph() {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {2, 3});
  b.output(b.node("Relu", {x}, "r", {2, 3}));
  return b.graph();
}

Result<std::vector<Value>> run_once(const runtime::Program& p) {
  std::vector<Value> in = {random_tensor({2, 3}, 1)};
  return p.run(in, {}, nullptr);
}

TEST(HostChecksTest, WrongOutputDtypeNamesPluginAndOutput) {
  auto reg = registry_of({misbehaving("wrong_dtype")});
  auto p = build(relu_graph(), reg.get(), {"wrong_dtype"});
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  ASSERT_EQ((*p)->placement().partitions.size(), 1u);
  auto out = run_once(**p);
  ASSERT_FALSE(out.is_ok());
  const std::string& m = out.status().message();
  EXPECT_NE(m.find("backend 'wrong_dtype' allocated output 0 'r_out' with dtype float16, but the partition "
                   "declares float32"), std::string::npos) << m;
}

TEST(HostChecksTest, WrongOutputShapeIsReportedEvenWhenThePluginDropsTheError) {
  auto reg = registry_of({misbehaving("wrong_shape")});
  auto p = build(relu_graph(), reg.get(), {"wrong_shape"});
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  auto out = run_once(**p);
  ASSERT_FALSE(out.is_ok());
  const std::string& m = out.status().message();
  EXPECT_NE(m.find("backend 'wrong_shape' allocated output 0 'r_out' with shape [3, 3], but the partition declares "
                   "float32[2, 3]"), std::string::npos) << m;
}

TEST(HostChecksTest, CrashInExecuteNamesBackendAndPartitionBeforeTheProcessDies) {
  auto child = run_in_child([](int fd) {
    ::dup2(fd, STDERR_FILENO);
    auto reg = registry_of({misbehaving("exec_crash")});
    auto p = build(relu_graph(), reg.get(), {"exec_crash"});
    if (!p.is_ok()) {
      std::fprintf(stderr, "load failed: %s\n", p.status().to_string().c_str());
      return 2;
    }
    std::fprintf(stderr, "partition %s\n", (*p)->placement().partitions.at(0).id.c_str());
    std::fflush(stderr);
    (void)run_once(**p);
    return 3;  // not reached
  }, 60);
  ASSERT_TRUE(child.is_ok()) << child.status().to_string();
  const std::string& log = child->output;
  EXPECT_FALSE(child->exited_cleanly()) << child->describe() << "\n" << log;  // a signal, or a sanitizer's exit
  const size_t at = log.find("partition exec_crash:");
  ASSERT_NE(at, std::string::npos) << log;
  const std::string id = log.substr(at + 10, log.find('\n', at) - at - 10);
  EXPECT_NE(log.find("kiln: backend 'exec_crash' in partition '" + id + "' crashed (SIGSEGV)"), std::string::npos)
      << log;
}

TEST(HostChecksTest, OutOfRangeClaimsAreWarnings) {
  auto reg = registry_of({misbehaving("bad_claim")});
  auto p = build(relu_graph(), reg.get(), {"bad_claim"});
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  const std::vector<std::string>& w = (*p)->placement().warnings;
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0], "backend 'bad_claim': node index 6 is out of range (the view has 1 nodes); ignored");
  // The rest of the answer stands: Relu runs on the plugin.
  EXPECT_EQ((*p)->placement().partitions.size(), 1u);
  EXPECT_TRUE(run_once(**p).is_ok());
}

// A private copy of a fake plugin in a fresh folder, with the given modes.
class PluginCopy {
 public:
  PluginCopy(mode_t dir_mode, mode_t file_mode) {
    std::string tmpl = (fs::temp_directory_path() / "kiln_plugin_XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data()) ? tmpl : "";
    file_ = dir_ + "/libkiln_fake_minimal.so";
    std::error_code ec;
    fs::copy_file(fake("minimal"), file_, ec);
    EXPECT_FALSE(ec) << ec.message();
    ::chmod(file_.c_str(), file_mode);
    ::chmod(dir_.c_str(), dir_mode);
  }
  ~PluginCopy() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const std::string& dir() const { return dir_; }
  const std::string& file() const { return file_; }

 private:
  std::string dir_, file_;
};

std::string first_error(const BackendRegistry& r) { return r.errors().empty() ? "" : r.errors()[0].message; }

TEST(PluginPathTest, WorldWritableFolderIsRefusedWithAReason) {
  PluginCopy copy(0777, 0755);
  auto reg = registry_of({copy.dir()});
  EXPECT_TRUE(reg->backends().empty());
  EXPECT_NE(first_error(*reg).find("plugin folder is writable by every user (mode 0777)"), std::string::npos)
      << first_error(*reg);
  // Its file named on its own is refused too: anyone could replace it.
  auto direct = registry_of({copy.file()});
  EXPECT_TRUE(direct->backends().empty());
  EXPECT_NE(first_error(*direct).find("folder writable by every user without the sticky bit"), std::string::npos)
      << first_error(*direct);
}

TEST(PluginPathTest, WorldWritableFileIsRefused) {
  PluginCopy copy(0755, 0666);
  auto reg = registry_of({copy.file()});
  EXPECT_TRUE(reg->backends().empty());
  EXPECT_NE(first_error(*reg).find("plugin file is writable by every user (mode 0666)"), std::string::npos)
      << first_error(*reg);
}

TEST(PluginPathTest, SafeFolderLoads) {
  PluginCopy copy(0755, 0755);
  auto reg = registry_of({copy.dir()});
  ASSERT_EQ(reg->backends().size(), 1u) << first_error(*reg);
  EXPECT_EQ(reg->backends()[0].path, copy.file());
}

TEST(PluginPathTest, RelativeEnvironmentFolderIsRefusedButAnExplicitRelativePathLoads) {
  PluginCopy copy(0755, 0755);
  const fs::path cwd = fs::current_path();
  fs::current_path(copy.dir());
  {
    ScopedEnv env("KILN_BACKEND_PATH", ".");
    BackendDiscovery d;
    d.use_default_dirs = false;
    auto reg = BackendRegistry::create(d);
    EXPECT_TRUE(reg->backends().empty());
    EXPECT_NE(first_error(*reg).find("relative folder in KILN_BACKEND_PATH refused"), std::string::npos)
        << first_error(*reg);
  }
  // Named explicitly, a bare file name is the file in the current folder
  // (loaded by its absolute path, never searched for on the library path).
  auto reg = registry_of({"libkiln_fake_minimal.so"});
  fs::current_path(cwd);
  ASSERT_EQ(reg->backends().size(), 1u) << first_error(*reg);
  EXPECT_EQ(reg->backends()[0].path, copy.file());
}

}  // namespace
}  // namespace kiln::abi_test
