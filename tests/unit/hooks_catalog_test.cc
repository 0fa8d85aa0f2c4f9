// hooks::ParseHooksDFile and HooksDFile::Matches (schema 1.0.0, the legacy
// 0.1.0, every `when` condition, regexes in Go syntax),
// and hooks::Catalog: masking and order across hooks.d directories, the
// per-stage directories, Problems(), Resolve, and watched directories (a
// change applies to the next Resolve; tests wait on the catalog's state,
// never on a fixed sleep).
#include "hooks/catalog.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/sys.h"
#include "test_util.h"

namespace outpost::hooks {
namespace {

using outpost::testing::MakeLoop;
using outpost::testing::RunUntil;
using V = std::vector<std::string>;

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }
void RemoveTree(const std::string& path) { ::nftw(path.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS); }

void Write(const std::string& path, const std::string& data, mode_t mode = 0644) {
  auto fd = sys::Open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
  ASSERT_TRUE(fd.ok()) << fd.error().message();
  ASSERT_TRUE(sys::WriteAll(fd->get(), data.data(), data.size(), "write").ok());
  ASSERT_EQ(0, ::fchmod(fd->get(), mode));
}

void Mkdir(const std::string& path) {
  ASSERT_EQ(0, ::mkdir(path.c_str(), 0755)) << path << ": " << std::strerror(errno);
}

class HooksDTest : public ::testing::Test {
 protected:
  HooksDTest() {
    tmp_ = outpost::testing::MakeTempDir("/tmp", "hooksd");
    hook_ = tmp_ + "/hook";
    Write(hook_, "#!/bin/sh\n", 0755);
  }
  ~HooksDTest() override { RemoveTree(tmp_); }

  // A 1.0.0 file running hook_ at prestart, with when = `when`.
  std::string Doc(const std::string& when, const std::string& stages = "[\"prestart\"]") const {
    return "{\"version\":\"1.0.0\",\"hook\":{\"path\":\"" + hook_ + "\"},\"when\":" + when + ",\"stages\":" + stages +
           "}";
  }
  HooksDFile Parse(const std::string& text) {
    auto f = ParseHooksDFile("/hd/x.json", text);
    EXPECT_TRUE(f.ok()) << f.error().message();
    return f.ok() ? f.value() : HooksDFile();
  }
  std::string ParseError(const std::string& text) {
    auto f = ParseHooksDFile("/hd/x.json", text);
    EXPECT_FALSE(f.ok()) << text;
    return f.ok() ? "" : f.error().message();
  }
  static MatchInput In(const std::string& command, std::map<std::string, std::string> annotations = {},
                       bool bind_mounts = false) {
    MatchInput in;
    in.command = command;
    in.annotations = std::move(annotations);
    in.has_bind_mounts = bind_mounts;
    return in;
  }

  std::string tmp_, hook_;
};

TEST_F(HooksDTest, ParsesSchema100) {
  auto f = Parse("{\"version\":\"1.0.0\",\"hook\":{\"path\":\"" + hook_ +
                 "\",\"args\":[\"h\",\"-v\"],\"env\":[\"A=1\"],\"timeout\":5},\"when\":{\"always\":true},"
                 "\"stages\":[\"createRuntime\",\"poststop\",\"createRuntime\"]}");
  EXPECT_EQ(f.name, "x.json");
  EXPECT_EQ(f.path, "/hd/x.json");
  EXPECT_EQ(f.schema, "1.0.0");
  EXPECT_EQ(f.hook.path, hook_);
  EXPECT_EQ(f.hook.args, (V{"h", "-v"}));
  EXPECT_EQ(f.hook.env, (V{"A=1"}));
  EXPECT_EQ(f.hook.timeout_seconds, 5);
  EXPECT_EQ(f.hook.source, "hooks.d /hd/x.json");
  EXPECT_EQ(f.stages, (std::vector<Stage>{Stage::kCreateRuntime, Stage::kPoststop}));  // each once
  EXPECT_FALSE(f.or_conditions);
  std::string why;
  EXPECT_TRUE(f.Matches(In("/bin/sh"), &why));
  EXPECT_EQ(why, "always");
}

TEST_F(HooksDTest, AlwaysFalseNeverMatches) {
  // Upstream: a condition given as false is one that does not hold.
  std::string why;
  EXPECT_FALSE(Parse(Doc("{\"always\":false}")).Matches(In("/bin/sh"), &why));
  EXPECT_EQ(why, "always is false (never matches)");
  EXPECT_FALSE(Parse(Doc("{\"always\":false,\"commands\":[\"sh\"]}")).Matches(In("/bin/sh")));
}

TEST_F(HooksDTest, CommandsAnyRegexUnanchored) {
  auto f = Parse(Doc("{\"commands\":[\"^/usr/bin/x$\",\"sh\"]}"));
  std::string why;
  EXPECT_TRUE(f.Matches(In("/bin/bash"), &why));  // "sh" is a substring
  EXPECT_EQ(why, "commands: \"sh\" matched \"/bin/bash\"");
  EXPECT_TRUE(f.Matches(In("/usr/bin/x")));
  EXPECT_FALSE(f.Matches(In("/usr/bin/xy"), &why));
  EXPECT_EQ(why, "commands: no regex matched \"/usr/bin/xy\"");

  auto anchored = Parse(Doc("{\"commands\":[\"^a$\"]}"));
  auto loose = Parse(Doc("{\"commands\":[\"a\"]}"));
  EXPECT_TRUE(anchored.Matches(In("a")));
  EXPECT_FALSE(anchored.Matches(In("xax")));
  EXPECT_TRUE(loose.Matches(In("xax")));
}

TEST_F(HooksDTest, AnnotationsEveryPairMustMatchOneAnnotation) {
  auto f = Parse(Doc("{\"annotations\":{\"^com\\\\.example\\\\.gpu$\":\"^(yes|true)$\",\"team\":\"ml\"}}"));
  std::string why;
  EXPECT_TRUE(f.Matches(In("/x", {{"com.example.gpu", "true"}, {"org.team", "ml-infra"}}), &why));
  EXPECT_NE(why.find("\"com.example.gpu\" matches key"), std::string::npos) << why;
  EXPECT_NE(why.find("\"org.team\" matches key \"team\""), std::string::npos) << why;
  // One pair without a match.
  EXPECT_FALSE(f.Matches(In("/x", {{"com.example.gpu", "true"}}), &why));
  EXPECT_EQ(why, "annotations: no annotation has a key matching \"team\" and a value matching \"ml\"");
  // Key matches, value does not; \. is a literal dot.
  EXPECT_FALSE(f.Matches(In("/x", {{"com.example.gpu", "no"}, {"team", "ml"}})));
  EXPECT_FALSE(f.Matches(In("/x", {{"comXexample.gpu", "yes"}, {"team", "ml"}})));
  // The key of one annotation and the value of another do not make a match.
  EXPECT_FALSE(f.Matches(In("/x", {{"com.example.gpu", "no"}, {"a", "yes"}, {"team", "ml"}})));
}

TEST_F(HooksDTest, HasBindMounts) {
  auto f = Parse(Doc("{\"hasBindMounts\":true}"));
  std::string why;
  EXPECT_TRUE(f.Matches(In("/x", {}, true), &why));
  EXPECT_EQ(why, "hasBindMounts: the task has bind mounts");
  EXPECT_FALSE(f.Matches(In("/x", {}, false), &why));
  EXPECT_EQ(why, "hasBindMounts: the task has none");
  auto never = Parse(Doc("{\"hasBindMounts\":false}"));
  EXPECT_FALSE(never.Matches(In("/x", {}, true)));
  EXPECT_FALSE(never.Matches(In("/x", {}, false)));
}

TEST_F(HooksDTest, ConditionsAreAnded) {
  auto f = Parse(Doc("{\"always\":true,\"hasBindMounts\":true,\"annotations\":{\"a\":\"1\"},\"commands\":[\"sh$\"]}"));
  std::string why;
  EXPECT_TRUE(f.Matches(In("/bin/sh", {{"a", "1"}}, true), &why));
  EXPECT_EQ(why.rfind("always; hasBindMounts", 0), 0u) << why;
  EXPECT_FALSE(f.Matches(In("/bin/ls", {{"a", "1"}}, true), &why));
  EXPECT_EQ(why, "commands: no regex matched \"/bin/ls\"");
  EXPECT_FALSE(f.Matches(In("/bin/sh", {{"a", "2"}}, true)));
  EXPECT_FALSE(f.Matches(In("/bin/sh", {{"a", "1"}}, false)));
}

TEST_F(HooksDTest, InvalidRegexNamesFieldAndRegex) {
  std::string e = ParseError(Doc("{\"commands\":[\"ok\",\"(unclosed\"]}"));
  EXPECT_EQ(e.rfind("/hd/x.json: when.commands[1]: invalid regex \"(unclosed\": ", 0), 0u) << e;
  e = ParseError(Doc("{\"annotations\":{\"[\":\"x\"}}"));
  EXPECT_EQ(e.rfind("/hd/x.json: when.annotations: invalid key regex \"[\": ", 0), 0u) << e;
  e = ParseError(Doc("{\"annotations\":{\"k\":\"a{2,1}\"}}"));
  EXPECT_EQ(e.rfind("/hd/x.json: when.annotations[\"k\"]: invalid value regex \"a{2,1}\": ", 0), 0u) << e;
}

// Go's regexp syntax, as podman and CRI-O read these files (hooks/regex.h;
// the syntax itself is in hooks_regex_test.cc).
TEST_F(HooksDTest, RegexesAreGoSyntax) {
  auto f = Parse(Doc("{\"commands\":[\"^/opt/\\\\d+\\\\s?\\\\w*\\\\.sh$\",\"(?i)^/usr/bin/systemd$\",\"[]?]\"]}"));
  EXPECT_TRUE(f.Matches(In("/opt/12run_1.sh")));
  EXPECT_FALSE(f.Matches(In("/opt/12run_1xsh")));
  EXPECT_TRUE(f.Matches(In("/usr/bin/SystemD")));
  EXPECT_TRUE(f.Matches(In("what?")));  // "[]?]": ']' or '?'
  std::string e = ParseError(Doc("{\"commands\":[\"\\\\pL\"]}"));
  EXPECT_EQ(e, "/hd/x.json: when.commands[0]: invalid regex \"\\\\pL\": Unicode character classes are not "
               "supported by outpost: `\\pL`")
      << e;
}

TEST_F(HooksDTest, HookPathMustExistAndBeAbsolute) {
  std::string e = ParseError("{\"version\":\"1.0.0\",\"hook\":{\"path\":\"" + tmp_ +
                             "/nope\"},\"when\":{\"always\":true},\"stages\":[\"prestart\"]}");
  EXPECT_EQ(e, "/hd/x.json: hook.path: " + tmp_ + "/nope does not exist");
  e = ParseError(
      "{\"version\":\"1.0.0\",\"hook\":{\"path\":\"rel\"},\"when\":{\"always\":true},\"stages\":[\"prestart\"]}");
  EXPECT_NE(e.find("hook.path: must be an absolute path"), std::string::npos) << e;
  e = ParseError("{\"version\":\"1.0.0\",\"when\":{\"always\":true},\"stages\":[\"prestart\"]}");
  EXPECT_NE(e.find("/hd/x.json: hook: required"), std::string::npos) << e;
}

TEST_F(HooksDTest, VersionErrors) {
  std::string e = ParseError("{\"version\":\"2.0.0\"}");
  EXPECT_EQ(e, "/hd/x.json: version: unknown hooks.d schema version \"2.0.0\"; outpost reads 1.0.0 and the legacy "
               "0.1.0");
  e = ParseError("{\"version\":1}");
  EXPECT_EQ(e, "/hd/x.json: version: expected a string (\"1.0.0\"), got number");
  e = ParseError("[1]");
  EXPECT_EQ(e, "/hd/x.json: expected a JSON object, got array");
  e = ParseError("{\"version\":");
  EXPECT_EQ(e.rfind("/hd/x.json: ", 0), 0u) << e;
}

TEST_F(HooksDTest, StagesMustBeKnownAndPresent) {
  std::string e = ParseError(Doc("{\"always\":true}", "[\"prestart\",\"precreate\"]"));
  EXPECT_EQ(e, "/hd/x.json: stages[1]: unknown stage \"precreate\"; the stages are prestart, createRuntime, "
               "createContainer, startContainer, poststart, poststop (outpost runs no extension stages)");
  e = ParseError(Doc("{\"always\":true}", "[]"));
  EXPECT_NE(e.find("stages: must name at least one stage"), std::string::npos) << e;
  e = ParseError("{\"version\":\"1.0.0\",\"hook\":{\"path\":\"" + hook_ + "\"},\"when\":{\"always\":true}}");
  EXPECT_NE(e.find("stages: required"), std::string::npos) << e;
}

TEST_F(HooksDTest, WhenNeedsACondition) {
  EXPECT_EQ(ParseError(Doc("{}")),
            "/hd/x.json: when: needs at least one condition: always, annotations, commands or hasBindMounts");
  EXPECT_NE(ParseError(Doc("{\"commands\":[]}")).find("when: needs at least one condition"), std::string::npos);
  EXPECT_NE(ParseError(Doc("{\"alway\":true}")).find("when.alway: unknown field (did you mean \"always\"?)"),
            std::string::npos);
}

TEST_F(HooksDTest, UnknownTopLevelKeysAreErrors) {
  std::string e = ParseError("{\"version\":\"1.0.0\",\"hook\":{\"path\":\"" + hook_ +
                             "\"},\"when\":{\"always\":true},\"stage\":[\"prestart\"]}");
  EXPECT_NE(e.find("stage: unknown field (did you mean \"stages\"?)"), std::string::npos) << e;
}

TEST_F(HooksDTest, LegacyConditionsAreOred) {
  auto f = Parse("{\"hook\":\"" + hook_ +
                 "\",\"arguments\":[\"--debug\"],\"stage\":[\"prestart\"],\"cmds\":[\"init$\"],"
                 "\"annotation\":[\"^gpu$\",\"^fpga$\"],\"hasbindmounts\":true}");
  EXPECT_EQ(f.schema, "0.1.0");
  EXPECT_TRUE(f.or_conditions);
  EXPECT_EQ(f.hook.path, hook_);
  EXPECT_EQ(f.hook.args, (V{hook_, "--debug"}));
  EXPECT_EQ(f.stages, (std::vector<Stage>{Stage::kPrestart}));
  std::string why;
  EXPECT_TRUE(f.Matches(In("/sbin/init"), &why));
  EXPECT_EQ(why, "commands: \"init$\" matched \"/sbin/init\"");
  EXPECT_TRUE(f.Matches(In("/bin/sh", {}, true)));
  // An annotation regex matches any annotation's value (whatever the key).
  EXPECT_TRUE(f.Matches(In("/bin/sh", {{"x", "fpga"}}), &why));
  EXPECT_NE(why.find("its value \"fpga\""), std::string::npos) << why;
  EXPECT_FALSE(f.Matches(In("/bin/sh", {{"gpu", "x"}}), &why));
  EXPECT_EQ(why.rfind("no condition matched: ", 0), 0u) << why;

  auto versioned =
      Parse("{\"version\":\"0.1.0\",\"hook\":\"" + hook_ + "\",\"stages\":[\"poststop\"],\"cmd\":[\"x\"]}");
  EXPECT_TRUE(versioned.Matches(In("/x")));
  EXPECT_TRUE(versioned.hook.args.empty());  // no arguments: argv is [path]
}

TEST_F(HooksDTest, LegacyErrors) {
  std::string e = ParseError("{\"hook\":\"" + hook_ + "\",\"stage\":[\"prestart\"],\"stages\":[\"prestart\"],"
                             "\"cmds\":[\"x\"]}");
  EXPECT_NE(e.find("stage: cannot set both \"stage\" and \"stages\""), std::string::npos) << e;
  e = ParseError("{\"hook\":\"" + hook_ + "\",\"stages\":[\"prestart\"]}");
  EXPECT_NE(e.find("no condition (cmds, annotations, or hasbindmounts: true)"), std::string::npos) << e;
  e = ParseError("{\"hook\":\"/nope/x\",\"stages\":[\"prestart\"],\"cmds\":[\"x\"]}");
  EXPECT_EQ(e, "/hd/x.json: hook: /nope/x does not exist");
  e = ParseError("{\"hook\":\"" + hook_ + "\",\"stages\":[\"prestart\"],\"annotations\":[\"ok\",\"(\"]}");
  EXPECT_NE(e.find("annotations[1]: invalid regex \"(\""), std::string::npos) << e;
  e = ParseError("{\"hook\":\"" + hook_ + "\",\"stages\":[\"prestart\"],\"cmds\":[\"x\"],\"bogus\":1}");
  EXPECT_NE(e.find("bogus: unknown field"), std::string::npos) << e;
}

class CatalogTest : public HooksDTest {
 protected:
  CatalogTest() : loop_(MakeLoop()) {
    a_ = tmp_ + "/a";
    b_ = tmp_ + "/b";
    hp_ = tmp_ + "/hp";
    Mkdir(a_);
    Mkdir(b_);
  }
  ~CatalogTest() override { cat_.reset(); }

  void Start(bool watch) {
    CatalogOptions o;
    o.hooks_dirs = {a_, b_};
    o.hook_path = hp_;
    o.watch = watch;
    auto c = Catalog::Start(loop_.get(), o);
    ASSERT_TRUE(c.ok()) << c.error().message();
    cat_ = std::move(c.value());
  }
  // A hooks.d file running hook_ (the file's argv[1] names it) always.
  std::string Always(const std::string& tag, const std::string& stages = "[\"prestart\"]") const {
    return "{\"version\":\"1.0.0\",\"hook\":{\"path\":\"" + hook_ + "\",\"args\":[\"hook\",\"" + tag +
           "\"]},\"when\":{\"always\":true},\"stages\":" + stages + "}";
  }
  // The tags (argv[1]) of the files that apply, in order.
  V Tags() const {
    V out;
    for (const HooksDFile& f : cat_->files()) out.push_back(f.hook.args.size() > 1 ? f.hook.args[1] : "?");
    return out;
  }
  // argv[1] of the prestart hooks Resolve gives for an empty spec.
  V Prestart() const {
    V out;
    HookSet set = cat_->Resolve(HookSet(), In("/bin/sh"));
    for (const Hook& h : set.at(Stage::kPrestart)) {
      out.push_back(h.args.size() > 1 ? h.args[1] : "?");
    }
    return out;
  }

  std::unique_ptr<Loop> loop_;
  std::string a_, b_, hp_;
  std::unique_ptr<Catalog> cat_;
};

TEST_F(CatalogTest, LaterDirectoryMasksAndOrderIsByLowerCasedName) {
  Write(a_ + "/a.json", Always("a in a"));
  Write(a_ + "/B.json", Always("B in a"));
  Write(b_ + "/a.json", Always("a in b"));
  Write(b_ + "/c.json", Always("c in b"));
  Write(b_ + "/readme.txt", "not a hook");
  Start(false);
  EXPECT_EQ(Tags(), (V{"a in b", "B in a", "c in b"}));  // byte order would put "B" first
  EXPECT_EQ(cat_->Masked(), (V{a_ + "/a.json"}));
  EXPECT_TRUE(cat_->Problems().empty());
  EXPECT_EQ(cat_->files()[0].hook.source, "hooks.d " + b_ + "/a.json");
}

TEST_F(CatalogTest, InvalidFilesAndUnreadableDirsAreProblemsNotFatal) {
  Write(a_ + "/z.json", Always("z"));
  Write(a_ + "/bad.json", "{\"version\":\"3\"}");
  Write(b_ + "/empty.json", "");
  Mkdir(b_ + "/dir.json");
  Write(tmp_ + "/file", "x");
  CatalogOptions o;
  o.hooks_dirs = {a_, tmp_ + "/missing", b_, tmp_ + "/file/sub"};
  o.hook_path = tmp_ + "/file";  // its stage "dirs" are not directories
  o.watch = false;
  auto c = Catalog::Start(loop_.get(), o);
  ASSERT_TRUE(c.ok()) << c.error().message();
  cat_ = std::move(c.value());
  EXPECT_EQ(Tags(), (V{"z"}));
  V problems = cat_->Problems();
  ASSERT_EQ(problems.size(), 10u) << ::testing::PrintToString(problems);
  EXPECT_EQ(problems[0], a_ + "/bad.json: version: unknown hooks.d schema version \"3\"; outpost reads 1.0.0 and the "
                              "legacy 0.1.0");
  EXPECT_EQ(problems[1], b_ + "/dir.json: not a regular file");
  EXPECT_EQ(problems[2].rfind(b_ + "/empty.json: ", 0), 0u) << problems[2];
  EXPECT_EQ(problems[3], tmp_ + "/file/createContainer: cannot read: Not a directory");
  EXPECT_EQ(problems[9], tmp_ + "/file/sub: cannot read: Not a directory");
  EXPECT_TRUE(std::is_sorted(problems.begin(), problems.end()));
}

TEST_F(CatalogTest, PerStageDirectories) {
  Mkdir(hp_);
  Mkdir(hp_ + "/prestart");
  Mkdir(hp_ + "/poststop");
  Write(hp_ + "/prestart/20-b", "#!/bin/sh\n", 0755);
  Write(hp_ + "/prestart/10-a", "#!/bin/sh\n", 0700);
  Write(hp_ + "/prestart/15-noexec", "#!/bin/sh\n", 0644);
  Write(hp_ + "/prestart/.hidden", "#!/bin/sh\n", 0755);
  ASSERT_EQ(0, ::symlink(hook_.c_str(), (hp_ + "/prestart/12-link").c_str()));
  Mkdir(hp_ + "/prestart/13-dir");
  Write(hp_ + "/poststop/x", "#!/bin/sh\n", 0755);
  Start(false);
  const HookSet& set = cat_->stage_dir_hooks();
  ASSERT_EQ(set.at(Stage::kPrestart).size(), 2u);
  EXPECT_EQ(set.at(Stage::kPrestart)[0].path, hp_ + "/prestart/10-a");
  EXPECT_EQ(set.at(Stage::kPrestart)[0].args, (V{"10-a", "prestart"}));
  EXPECT_TRUE(set.at(Stage::kPrestart)[0].env.empty());
  EXPECT_EQ(set.at(Stage::kPrestart)[0].source, "hook_path " + hp_ + "/prestart/10-a");
  EXPECT_EQ(set.at(Stage::kPrestart)[1].path, hp_ + "/prestart/20-b");
  ASSERT_EQ(set.at(Stage::kPoststop).size(), 1u);
  EXPECT_EQ(set.at(Stage::kPoststop)[0].args, (V{"x", "poststop"}));
  EXPECT_EQ(set.size(), 3u);
  EXPECT_TRUE(cat_->Problems().empty());
}

TEST_F(CatalogTest, ResolveOrderAndReasons) {
  Write(a_ + "/10-always.json", Always("always", "[\"prestart\",\"poststop\"]"));
  Write(a_ + "/20-sh.json", "{\"version\":\"1.0.0\",\"hook\":{\"path\":\"" + hook_ +
                                "\",\"args\":[\"hook\",\"sh\"]},\"when\":{\"commands\":[\"/sh$\"]},"
                                "\"stages\":[\"prestart\"]}");
  Mkdir(hp_);
  Mkdir(hp_ + "/prestart");
  Write(hp_ + "/prestart/dir", "#!/bin/sh\n", 0755);
  Start(false);
  HookSet spec;
  Hook mine;
  mine.path = "/bin/true";
  mine.args = {"true", "spec"};
  mine.source = "job spec";
  spec.at(Stage::kPrestart).push_back(mine);
  std::vector<ResolvedHook> resolved;
  V skipped;
  HookSet set = cat_->Resolve(spec, In("/bin/sh"), &resolved, &skipped);
  ASSERT_EQ(set.at(Stage::kPrestart).size(), 4u);
  EXPECT_EQ(set.at(Stage::kPrestart)[0].args[1], "spec");
  EXPECT_EQ(set.at(Stage::kPrestart)[1].args[1], "always");
  EXPECT_EQ(set.at(Stage::kPrestart)[2].args[1], "sh");
  EXPECT_EQ(set.at(Stage::kPrestart)[3].args, (V{"dir", "prestart"}));
  EXPECT_EQ(set.at(Stage::kPrestart)[2].source, "hooks.d " + a_ + "/20-sh.json");
  ASSERT_EQ(set.at(Stage::kPoststop).size(), 1u);
  EXPECT_TRUE(skipped.empty());
  // Stage by stage, in the order they run.
  ASSERT_EQ(resolved.size(), 5u);
  EXPECT_EQ(resolved[0].why, "job spec");
  EXPECT_EQ(resolved[1].why, "hooks.d 10-always.json: always");
  EXPECT_EQ(resolved[2].why, "hooks.d 20-sh.json: commands: \"/sh$\" matched \"/bin/sh\"");
  EXPECT_EQ(resolved[3].why, "hook_path");
  EXPECT_EQ(resolved[3].stage, Stage::kPrestart);
  EXPECT_EQ(resolved[4].stage, Stage::kPoststop);

  resolved.clear();
  set = cat_->Resolve(HookSet(), In("/bin/bash"), &resolved, &skipped);
  EXPECT_EQ(set.at(Stage::kPrestart).size(), 2u);
  EXPECT_EQ(skipped, (V{"20-sh.json: commands: no regex matched \"/bin/bash\""}));
}

TEST_F(CatalogTest, RescanRereadsWithoutWatching) {
  Start(false);
  EXPECT_TRUE(Prestart().empty());
  Write(a_ + "/x.json", Always("x"));
  EXPECT_TRUE(Prestart().empty());  // not watched
  cat_->Rescan();
  EXPECT_EQ(Prestart(), (V{"x"}));
}

TEST_F(CatalogTest, WatchedFileAddedAppliesAndRemovedStops) {
  Write(a_ + "/10.json", Always("ten"));
  Start(true);
  EXPECT_EQ(Prestart(), (V{"ten"}));
  // Installed the atomic way (renamed in) and by writing in place.
  Write(b_ + "/.20.json.tmp", Always("twenty"));
  ASSERT_EQ(0, ::rename((b_ + "/.20.json.tmp").c_str(), (b_ + "/20.json").c_str()));
  Write(a_ + "/05.json", Always("five"));
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return cat_->files().size() == 3; })) << ::testing::PrintToString(Tags());
  EXPECT_EQ(Prestart(), (V{"five", "ten", "twenty"}));
  // Masking follows changes too.
  Write(b_ + "/10.json", Always("ten in b"));
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return cat_->Masked().size() == 1; }));
  EXPECT_EQ(Prestart(), (V{"five", "ten in b", "twenty"}));

  ASSERT_EQ(0, ::unlink((a_ + "/05.json").c_str()));
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return cat_->files().size() == 2; }));
  EXPECT_EQ(Prestart(), (V{"ten in b", "twenty"}));

  // A file becoming invalid is skipped and listed.
  Write(b_ + "/20.json", "{");
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return cat_->Problems().size() == 1; }));
  EXPECT_EQ(Prestart(), (V{"ten in b"}));
  EXPECT_EQ(cat_->Problems()[0].rfind(b_ + "/20.json: ", 0), 0u) << cat_->Problems()[0];
}

TEST_F(CatalogTest, WatchedStageDirectory) {
  Mkdir(hp_);
  Start(true);
  EXPECT_TRUE(cat_->stage_dir_hooks().empty());
  Mkdir(hp_ + "/prestart");
  Write(hp_ + "/prestart/.x.tmp", "#!/bin/sh\n", 0755);
  ASSERT_EQ(0, ::rename((hp_ + "/prestart/.x.tmp").c_str(), (hp_ + "/prestart/x").c_str()));
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return cat_->stage_dir_hooks().size() == 1; }));
  EXPECT_EQ(Prestart(), (V{"prestart"}));  // argv[1] of a per-stage hook is the stage
  // Losing the exec bit disables it.
  ASSERT_EQ(0, ::chmod((hp_ + "/prestart/x").c_str(), 0644));
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return cat_->stage_dir_hooks().empty(); }));
}

// containerd's hook-injector NRI plugin adds the hooks of the hooks.d files
// the agent reads too: a hook from two sources runs once.
TEST_F(CatalogTest, HookFromNriAndHooksDRunsOnce) {
  Write(a_ + "/10-inj.json", "{\"version\":\"1.0.0\",\"hook\":{\"path\":\"" + hook_ +
                                 "\",\"env\":[\"A=1\"]},\"when\":{\"always\":true},"
                                 "\"stages\":[\"prestart\",\"poststop\"]}");
  Start(false);
  auto nri = [&](std::vector<std::string> args, std::vector<std::string> env) {
    Hook h;
    h.path = hook_;
    h.args = std::move(args);
    h.env = std::move(env);
    h.timeout_seconds = 7;
    h.source = "nri plugin 10-injector";
    return h;
  };
  HookSet spec;
  Hook own;
  own.path = "/bin/true";
  own.source = "job spec";
  spec.at(Stage::kPrestart).push_back(own);
  // As the injector hands it over: argv [path] where the file has no args.
  spec.at(Stage::kPrestart).push_back(nri({hook_}, {"A=1"}));
  spec.at(Stage::kPoststop).push_back(nri({}, {"A=1"}));
  std::vector<ResolvedHook> resolved;
  HookSet set = cat_->Resolve(spec, In("/bin/sh"), &resolved);
  ASSERT_EQ(set.at(Stage::kPrestart).size(), 2u) << ::testing::PrintToString(resolved.size());
  EXPECT_EQ(set.at(Stage::kPrestart)[0].path, "/bin/true");
  // The first stays, where it is, with its timeout.
  EXPECT_EQ(set.at(Stage::kPrestart)[1].source, "nri plugin 10-injector");
  EXPECT_EQ(set.at(Stage::kPrestart)[1].timeout_seconds, 7);
  ASSERT_EQ(set.at(Stage::kPoststop).size(), 1u);
  ASSERT_EQ(resolved.size(), 3u);
  EXPECT_EQ(resolved[1].why, "nri plugin 10-injector; also from hooks.d " + a_ + "/10-inj.json");

  // Not the same hook: another env, other args, another stage.
  HookSet other;
  other.at(Stage::kPrestart).push_back(nri({}, {"A=2"}));
  other.at(Stage::kPrestart).push_back(nri({"hook", "x"}, {"A=1"}));
  other.at(Stage::kPoststart).push_back(nri({}, {"A=1"}));
  set = cat_->Resolve(other, In("/bin/sh"));
  EXPECT_EQ(set.at(Stage::kPrestart).size(), 3u);
  EXPECT_EQ(set.at(Stage::kPoststart).size(), 1u);
  EXPECT_EQ(set.at(Stage::kPoststop).size(), 1u);
}

TEST_F(CatalogTest, HookRepeatedWithinOneSourceRunsAsOftenAsListed) {
  Write(a_ + "/1.json", Always("same"));
  Write(a_ + "/2.json", Always("same"));
  Start(false);
  Hook h = cat_->files()[0].hook;
  HookSet spec;
  h.source = "nri plugin 10-injector";
  spec.at(Stage::kPrestart).push_back(h);
  // One from NRI, two from hooks.d: twice (the most one source lists it).
  EXPECT_EQ(cat_->Resolve(spec, In("/bin/sh")).at(Stage::kPrestart).size(), 2u);
  spec.at(Stage::kPrestart).push_back(h);
  EXPECT_EQ(cat_->Resolve(spec, In("/bin/sh")).at(Stage::kPrestart).size(), 2u);
  spec.at(Stage::kPrestart).push_back(h);
  EXPECT_EQ(cat_->Resolve(spec, In("/bin/sh")).at(Stage::kPrestart).size(), 3u);
  // A job spec listing a hook twice runs it twice.
  HookSet twice;
  Hook mine;
  mine.path = "/bin/true";
  mine.source = "job spec";
  twice.at(Stage::kPoststop) = {mine, mine};
  EXPECT_EQ(cat_->Resolve(twice, In("/bin/sh")).at(Stage::kPoststop).size(), 2u);
}

TEST(OncePerSourceTest, JobSpecAndNriWithoutACatalog) {
  HookSet set;
  Hook h;
  h.path = "/usr/libexec/gpu-setup";
  h.source = "job spec";
  set.at(Stage::kCreateRuntime).push_back(h);
  h.source = "nri plugin 10-a";
  h.args = {"/usr/libexec/gpu-setup"};
  set.at(Stage::kCreateRuntime).push_back(h);
  h.source = "nri plugin 20-b";
  set.at(Stage::kCreateRuntime).push_back(h);
  HookSet out = OncePerSource(set);
  ASSERT_EQ(out.at(Stage::kCreateRuntime).size(), 1u);
  EXPECT_EQ(out.at(Stage::kCreateRuntime)[0].source, "job spec");
  EXPECT_EQ(out.size(), 1u);
}

TEST_F(CatalogTest, StartRejectsRelativeDirectories) {
  CatalogOptions o;
  o.hooks_dirs = {"hooks.d"};
  auto c = Catalog::Start(loop_.get(), o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message(), "hooks_dirs[0]: must be an absolute path, got \"hooks.d\"");
}

}  // namespace
}  // namespace outpost::hooks
