package app

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

const helpHeader = `contextd serves the contextd API (gRPC, Connect and gRPC-Web), the dashboard (/ui/) and the
provider-compatible gateway (/v1/) on one port, and Prometheus metrics on another.

Usage:
  contextd [FLAGS]                      run the server
  contextd migrate [FLAGS]              apply the database migrations and exit (same flags)
  contextd tokenizer import [-encoding NAME] [-dir DIR] tokenizer.json
                                        convert a model's tokenizer.json for exact counting
                                        (contextd tokenizer import --help for its flags)
  contextd --version                    print the version and exit
  contextd --help                       print this help and exit

Every flag is also an environment variable: --listen-addr is CONTEXTD_LISTEN_ADDR. A flag wins over the
variable, the variable over the default. Secrets are never shown.

Flags:
`

// WriteHelp writes contextd --help: the subcommands, then every setting as
// a person reads it — its flag, the kind of value it takes, its default
// (sizes also in KiB/MiB), the value the environment sets now unless it is
// a secret, and what it does.
func WriteHelp(w io.Writer, lookupEnv func(string) (string, bool)) {
	var b strings.Builder
	b.WriteString(helpHeader)
	for _, s := range settings {
		fmt.Fprintf(&b, "  --%s %s\n", flagName(s.env), settingKind(s))
		facts := []string{s.env}
		switch {
		case s.secret:
			facts = append(facts, "secret")
		case s.def == "":
			facts = append(facts, "default: none")
		default:
			facts = append(facts, "default: "+readableDefault(s))
		}
		if v, ok := lookupEnv(s.env); ok && !s.secret {
			facts = append(facts, fmt.Sprintf("set now: %q", v))
		}
		b.WriteString(wrap("("+strings.Join(facts, "; ")+") "+s.usage, 6, 104))
	}
	_, _ = io.WriteString(w, b.String())
}

// settingKind names the kind of value a setting takes, from its name and
// default, so the table of settings stays one line each.
func settingKind(s envFlag) string {
	name := strings.TrimPrefix(s.env, "CONTEXTD_")
	switch {
	case s.env == "CONTEXTD_LOG_LEVEL":
		return "LEVEL"
	case s.env == "CONTEXTD_AUTH":
		return "auto|on|off"
	case s.env == "CONTEXTD_PPROF":
		return strings.Join(pprofModes, "|")
	case strings.HasSuffix(name, "_ADDR"):
		return "HOST:PORT"
	case strings.HasSuffix(name, "_URL"):
		return "URL"
	case strings.HasSuffix(name, "_FILE"):
		return "FILE"
	case strings.HasSuffix(name, "_DIR"):
		return "DIR"
	case strings.HasSuffix(name, "_BYTES"):
		return "BYTES"
	case strings.HasSuffix(name, "_RPS"):
		return "NUMBER"
	case strings.HasPrefix(s.usage, "comma-separated"):
		return "LIST"
	case s.def == "true" || s.def == "false":
		return "BOOL"
	}
	if _, err := strconv.Atoi(s.def); err == nil {
		return "INT"
	}
	if _, err := strconv.ParseFloat(s.def, 64); err == nil {
		return "NUMBER"
	}
	if _, err := time.ParseDuration(s.def); err == nil {
		return "DURATION"
	}
	return "STRING"
}

// readableDefault is the default as written, with a byte size also in the
// largest binary unit that divides it.
func readableDefault(s envFlag) string {
	n, err := strconv.Atoi(s.def)
	if settingKind(s) != "BYTES" || err != nil || n < 1024 {
		return s.def
	}
	for _, u := range []struct {
		name string
		size int
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n%u.size == 0 {
			return fmt.Sprintf("%d (%d %s)", n, n/u.size, u.name)
		}
	}
	return s.def
}

// wrap breaks text into lines of at most width columns, each indented.
func wrap(text string, indent, width int) string {
	var b strings.Builder
	line := 0
	for _, word := range strings.Fields(text) {
		if line > 0 && line+1+len([]rune(word)) > width-indent {
			b.WriteByte('\n')
			line = 0
		}
		if line == 0 {
			b.WriteString(strings.Repeat(" ", indent))
		} else {
			b.WriteByte(' ')
			line++
		}
		b.WriteString(word)
		line += len([]rune(word))
	}
	b.WriteByte('\n')
	return b.String()
}

// Version describes the running binary from its build information: the
// module version (a tag, or "(devel)" for a build from a checkout), the VCS
// revision and time when the build recorded them, and the Go toolchain.
func Version() string {
	v := "contextd (unknown build)"
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v + " " + runtime.Version()
	}
	v = "contextd " + info.Main.Version
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		v += " " + rev[:min(12, len(rev))]
		if t := settings["vcs.time"]; t != "" {
			v += " " + t
		}
		if settings["vcs.modified"] == "true" {
			v += " (modified)"
		}
	}
	return v + " " + info.GoVersion + " " + runtime.GOOS + "/" + runtime.GOARCH
}
