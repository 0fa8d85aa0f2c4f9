// The bash completion script and the man page are generated from the
// command table, the help texts and kCommandOptions: every command shows in
// both, and the option table agrees with what each help text documents.
#include <gtest/gtest.h>

#include <cstring>
#include <regex>
#include <set>
#include <string>

#include "base/strings.h"
#include "cli/cli.h"

namespace outpost::cli {
namespace {

std::set<std::string> TableOptions(const char* options) {
  std::set<std::string> out;
  for (const std::string& o : Split(options, ' ')) {
    if (!o.empty()) out.insert(o.substr(0, o.find('=')));
  }
  return out;
}

const CommandOptions* OptionsOf(const std::string& name) {
  for (size_t i = 0; i < kCommandOptionsCount; i++) {
    if (name == kCommandOptions[i].command) return &kCommandOptions[i];
  }
  return nullptr;
}

// The options a help text documents: every option-like word before its
// Examples (usage lines, option lists, and the prose that names them).
std::set<std::string> HelpOptions(const std::string& help) {
  std::set<std::string> out;
  static const std::regex kOption("(^|[\\s\\[|,(`])(--?[a-z][a-z0-9-]*)");
  for (const std::string& line : Split(help, '\n')) {
    if (StartsWith(line, "Examples:")) break;
    for (std::sregex_iterator it(line.begin(), line.end(), kOption), end; it != end; ++it) out.insert((*it)[2]);
  }
  return out;
}

TEST(CliCompletion, EveryCommandHasAnOptionEntryAndBack) {
  size_t n;
  const Command* cmds = Commands(&n);
  for (size_t i = 0; i < n; i++) EXPECT_NE(OptionsOf(cmds[i].name), nullptr) << cmds[i].name;
  for (size_t i = 0; i < kCommandOptionsCount; i++) {
    bool found = false;
    for (size_t k = 0; k < n; k++) found |= std::strcmp(cmds[k].name, kCommandOptions[i].command) == 0;
    EXPECT_TRUE(found) << kCommandOptions[i].command << " is in kCommandOptions but not a command";
  }
}

TEST(CliCompletion, OptionTableMatchesTheHelpTexts) {
  std::set<std::string> global = TableOptions(kGlobalOptions);
  size_t n;
  const Command* cmds = Commands(&n);
  for (size_t i = 0; i < n; i++) {
    const CommandOptions* o = OptionsOf(cmds[i].name);
    if (!o) continue;
    std::set<std::string> table = TableOptions(o->options), help = HelpOptions(cmds[i].help);
    for (const std::string& opt : table) {
      EXPECT_TRUE(help.count(opt)) << cmds[i].name << ": " << opt << " is in the option table, not in its help";
    }
    for (const std::string& opt : help) {
      EXPECT_TRUE(table.count(opt) || global.count(opt))
          << cmds[i].name << ": its help documents " << opt << ", the option table does not have it";
    }
  }
}

TEST(CliCompletion, BashScriptHasEveryCommandAndItsOptions) {
  std::string script = BashCompletion();
  EXPECT_NE(script.find("complete -F _outpost outpost\n"), std::string::npos);
  size_t n;
  const Command* cmds = Commands(&n);
  for (size_t i = 0; i < n; i++) {
    std::string name = cmds[i].name;
    size_t at = script.find("\n    " + name + ") opts=\"");
    ASSERT_NE(at, std::string::npos) << name;
    size_t from = at + name.size() + 13, to = script.find('"', from);
    std::string line = " " + script.substr(from, to - from) + " ";
    for (const std::string& opt : TableOptions(OptionsOf(name)->options)) {
      EXPECT_NE(line.find(" " + opt + " "), std::string::npos) << name << " " << opt << ": " << line;
    }
    // The list of commands for the first word.
    EXPECT_TRUE(std::regex_search(script, std::regex("compgen -W \"[^\"]*\\b" + name + "\\b")) ) << name;
  }
  EXPECT_NE(script.find("_outpost_jobs"), std::string::npos);
}

TEST(CliCompletion, ManPageHasEveryCommandAndEscapesRoff) {
  std::string man = ManPage();
  EXPECT_EQ(man.rfind(".\\\" outpost(1)", 0), 0u);
  EXPECT_NE(man.find("\n.TH OUTPOST 1 "), std::string::npos);
  size_t n;
  const Command* cmds = Commands(&n);
  for (size_t i = 0; i < n; i++) {
    EXPECT_NE(man.find("\n.SS " + std::string(cmds[i].name) + "\n"), std::string::npos) << cmds[i].name;
  }
  EXPECT_NE(man.find("\\-\\-timeout"), std::string::npos);
  for (const std::string& line : Split(man, '\n')) {
    // No line of text may start a request by accident, and no bare backslash
    // escape other than the ones the page means.
    if (!line.empty() && (line[0] == '.' || line[0] == '\'')) {
      EXPECT_TRUE(std::regex_match(line, std::regex("\\.(\\\\\".*|TH .*|SH .*|SS .*|PP|nf|fi|TP|B .*|I .*)"))) << line;
    }
  }
}

}  // namespace
}  // namespace outpost::cli
