package contextctl

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// completion prints a shell completion script built from the command
// table: commands, each command's flags, the values of --tier and --role,
// files where a flag or count takes one, and session ids (from the hidden
// __sessions command, with the same CONTEXTD_ADDR and CONTEXTD_TOKEN)
// where a command takes a session.
func completion(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 || (args[0] != "bash" && args[0] != "zsh") {
		fmt.Fprintln(stderr, "contextctl: completion takes bash or zsh")
		return exitUsage
	}
	script := bashCompletion(fs)
	if args[0] == "zsh" {
		// zsh runs the bash function through its bashcompinit layer,
		// which needs the completion system (compinit) loaded first.
		script = zshPreamble + script
	}
	fmt.Fprint(stdout, script)
	return exitOK
}

// zshPreamble loads zsh's completion system when ~/.zshrc has not, then
// its emulation of bash's complete and compgen.
const zshPreamble = "(( ${+functions[compdef]} )) || { autoload -U +X compinit && compinit }\n" +
	"autoload -U +X bashcompinit && bashcompinit\n"

// fileFlags are the flags that take a file name.
var fileFlags = []string{"ca-file", "cert-file", "key-file", "system-file", "tools-file", "file"}

// valueFlags are the flags of fs that take a value, so the word after one
// is not a command.
func valueFlags(fs *flag.FlagSet) []string {
	var out []string
	fs.VisitAll(func(f *flag.Flag) {
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
			out = append(out, f.Name)
		}
	})
	return out
}

func bashCompletion(fs *flag.FlagSet) string {
	valueFlags := valueFlags(fs)
	var names, sessionCmds []string
	var perCommand strings.Builder
	for _, c := range commands {
		names = append(names, c.name)
		if c.session {
			sessionCmds = append(sessionCmds, c.name)
		}
		fmt.Fprintf(&perCommand, "    %s) flags=%q ;;\n", c.name, strings.Join(prefixed(c.flags), " "))
	}
	sort.Strings(names)
	return fmt.Sprintf(`# contextctl completion (bash). Load it with: source <(contextctl completion bash)
_contextctl() {
  local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
  local cmd="" i w
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="${COMP_WORDS[i]}"
    case "$w" in
      %s) ((i++)) ;;
      -*) ;;
      *) cmd="$w"; break ;;
    esac
  done
  case "$prev" in
    %s) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    --tier) COMPREPLY=($(compgen -W "prune summarize drop_middle" -- "$cur")); return ;;
    --role) COMPREPLY=($(compgen -W "user assistant system" -- "$cur")); return ;;
    %s) COMPREPLY=(); return ;;
  esac
  local flags=""
  case "$cmd" in
%s  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$flags %s" -- "$cur"))
    return
  fi
  case "$cmd" in
    "") COMPREPLY=($(compgen -W "%s" -- "$cur")) ;;
    count) COMPREPLY=($(compgen -f -- "$cur")) ;;
    completion) COMPREPLY=($(compgen -W "bash zsh" -- "$cur")) ;;
    %s)
      if ((COMP_CWORD == i + 1)); then
        COMPREPLY=($(compgen -W "$(contextctl %s 2>/dev/null)" -- "$cur"))
      fi ;;
  esac
}
complete -F _contextctl contextctl
`, strings.Join(prefixed(valueFlags), "|"), strings.Join(prefixed(fileFlags), "|"), strings.Join(prefixed(without(valueFlags, fileFlags)), "|"),
		perCommand.String(), strings.Join(prefixed(globalFlags), " "), strings.Join(names, " "), strings.Join(sessionCmds, "|"), sessionIDsCommand)
}

func prefixed(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "--" + n
	}
	return out
}

func without(names, drop []string) []string {
	skip := map[string]bool{"tier": true, "role": true}
	for _, d := range drop {
		skip[d] = true
	}
	var out []string
	for _, n := range names {
		if !skip[n] {
			out = append(out, n)
		}
	}
	return out
}
