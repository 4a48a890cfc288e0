package main

import (
	"fmt"
	"io"
	"strings"
)

// runCompletion prints a completion script for bash or zsh: commands,
// then each command's flags (from the commands themselves); for a command
// with subcommands (topic), its subcommands, then each one's flags.
func runCompletion(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 1 || (args[0] != "bash" && args[0] != "zsh") {
		fmt.Fprintln(stderr, "usage: narad-storaged completion bash|zsh\n\n"+
			"  bash: source <(narad-storaged completion bash)\n"+
			"  zsh:  source <(narad-storaged completion zsh)")
		return 2
	}
	var names []string
	var cases strings.Builder
	for _, c := range commands {
		names = append(names, c.name)
		var flags []string
		for _, f := range commandFlags(c) {
			flags = append(flags, "--"+f)
		}
		if c.name == "completion" {
			flags = []string{"bash", "zsh"}
		}
		if subs := subcommandsOf(c.name); subs != nil {
			cases.WriteString(subcommandCase(c.name, subs))
			continue
		}
		fmt.Fprintf(&cases, "    %s) words=%q ;;\n", c.name, strings.Join(flags, " "))
	}
	script := fmt.Sprintf(`# narad-storaged completion (%[1]s)
_narad_storaged() {
  local cur cmd words
  cur="${COMP_WORDS[COMP_CWORD]}"
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W %[2]q -- "$cur"))
    return 0
  fi
  cmd="${COMP_WORDS[1]}"
  case "$cmd" in
%[3]s    *) words="" ;;
  esac
  COMPREPLY=($(compgen -f -W "$words" -- "$cur"))
}
`, args[0], strings.Join(names, " ")+" help --help --version", cases.String())
	if args[0] == "zsh" {
		script += "autoload -U +X bashcompinit && bashcompinit\n"
	}
	script += "complete -F _narad_storaged narad-storaged\n"
	fmt.Fprint(stdout, script)
	return 0
}

// subcommandsOf is the subcommands of a command that has some.
func subcommandsOf(name string) []command {
	if name == "topic" {
		return topicCommands
	}
	return nil
}

// subcommandCase is the completion script's case of a command with
// subcommands: their names second, then the flags of the one given.
func subcommandCase(name string, subs []command) string {
	var names []string
	var inner strings.Builder
	for _, sc := range subs {
		names = append(names, sc.name)
		var flags []string
		for _, f := range commandFlags(sc) {
			flags = append(flags, "--"+f)
		}
		fmt.Fprintf(&inner, "        %s) words=%q ;;\n", sc.name, strings.Join(flags, " "))
	}
	return fmt.Sprintf("    %s)\n      if [ \"$COMP_CWORD\" -eq 2 ]; then\n        words=%q\n      else\n        case \"${COMP_WORDS[2]}\" in\n%s        *) words=\"\" ;;\n        esac\n      fi ;;\n",
		name, strings.Join(names, " "), inner.String())
}
