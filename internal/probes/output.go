package probes

import (
	"regexp"
	"slices"
	"strings"
)

// maxOutputScan bounds the bytes of one output read for tests, errors and
// URLs: its head and its tail (where test summaries and tracebacks end).
const maxOutputScan = 64 << 10

var (
	// Exit statuses as harnesses print them: mini-swe-agent's
	// <returncode>, Codex's "Process exited with code N" and
	// "Exit code: N", OpenHands' "[Command finished with exit code N]",
	// JSON "exit_code": N.
	exitRe = regexp.MustCompile(`(?i)<returncode>\s*(-?\d+)\s*</returncode>|exited with (?:exit )?code:?\s*(-?\d+)|exit(?: |_)?code["']?\s*[:=]?\s*(-?\d+)|exit status (-?\d+)`)

	// Tests: pytest node ids with their verdict, unittest/Django lines, Go.
	pytestRe   = regexp.MustCompile(`(?m)^(\S+\.py::\S+)\s+(PASSED|FAILED|ERROR|XPASS|XFAIL)\b|^(PASSED|FAILED|ERROR) (\S+\.py::[^\s]+)`)
	unittestRe = regexp.MustCompile(`(?m)^(test\w*) \(([\w.]+)\)(?:\s*\n[^\n]*)?\s*\.\.\. (ok|FAIL|ERROR|skipped|expected failure)|^(FAIL|ERROR): (test\w*) \(([\w.]+)\)`)
	goTestRe   = regexp.MustCompile(`(?m)^\s*--- (PASS|FAIL): (\S+)`)

	// The first line of an error: an exception line (Python, Java, JS),
	// "error:"/"fatal:"/"panic:" lines, pytest's "E   " lines, a shell's
	// complaint.
	errorRe = regexp.MustCompile(`(?m)^[ \t]*(?:E {2,})?((?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit)(?::[ \t].*|:?[ \t]*$)|(?i:error|fatal|panic)(?:\[[^\]\n]*\])?:[ \t].*|[\w./-]+: (?:line \d+: )?[^\n]*(?:command not found|No such file or directory|Permission denied))`)

	urlRe = regexp.MustCompile(`https?://[^\s<>"'` + "`" + `)\]}|]+`)
)

// MaxURL is the longest URL Facts keeps, in bytes.
const MaxURL = 2 * MaxHead

// exitStatus returns the exit status an output prints, or "".
func exitStatus(out string) string {
	m := exitRe.FindStringSubmatch(scanWindow(out))
	if m == nil {
		return ""
	}
	for _, g := range m[1:] {
		if g != "" {
			return g
		}
	}
	return ""
}

// scanWindow is the head and tail of a long output.
func scanWindow(s string) string {
	if len(s) <= maxOutputScan {
		return s
	}
	return s[:maxOutputScan/2] + "\n" + s[len(s)-maxOutputScan/2:]
}

// output records what a tool's output (or an observation sent as a user
// message) shows: tests, errors, URLs, and the file an editor has open.
func (x *extractor) output(out string, isErr bool, base Event) {
	out = scanWindow(out)
	if i := strings.LastIndex(out, "(Open file: "); i >= 0 {
		rest, _, _ := strings.Cut(out[i+len("(Open file: "):], ")")
		if rest != "n/a" && !strings.ContainsAny(rest, "\n") {
			x.open = rest
		}
	}
	eachTest(out, func(_, name string, pass bool) { x.test(name, pass, base) })
	for _, l := range errorLines(out, isErr, -1) {
		e := base
		e.Kind, e.Text, e.Cut = Error, l.text, l.cut
		x.add(e)
	}
	x.urls(out, base)
}

type errorLine struct {
	text string
	cut  bool
}

// errorLines returns the distinct first lines of the errors an output
// shows (Head of each), in order, at most max of them (all when max < 0);
// a failed call's output that shows none gives its own first line.
func errorLines(out string, isErr bool, max int) []errorLine {
	var lines []errorLine
	seen := map[string]bool{}
	for _, m := range errorRe.FindAllStringSubmatch(out, -1) {
		line, cut := Head(m[1])
		if line == "" || seen[line] {
			continue
		}
		if len(lines) == max {
			break
		}
		seen[line] = true
		lines = append(lines, errorLine{line, cut})
	}
	if isErr && len(seen) == 0 && max != 0 {
		if line, cut := Head(out); line != "" {
			lines = append(lines, errorLine{line, cut})
		}
	}
	return lines
}

// Facts returns what a pruned output's stand-in keeps of it, so an
// artifact survives its masking: the exit status the output prints ("" when
// none), the first lines of its errors (at most max, each at most MaxHead
// bytes, "…" ending one cut at a word) and its first distinct URLs (at most
// max, each at most MaxURL bytes: a longer one, a signed link or a data
// blob, is left out rather than cut), as Extract reads them. It reads the output's head and tail as
// Extract does (at most 64 KiB).
func Facts(out string, isErr bool, max int) (status string, errors, urls []string) {
	out = scanWindow(out)
	for _, l := range errorLines(out, isErr, max) {
		if l.cut {
			l.text += "…"
		}
		errors = append(errors, l.text)
	}
	for _, u := range urlRe.FindAllString(out, -1) {
		if u = strings.TrimRight(u, ".,;:!?"); len(u) <= MaxURL && len(urls) < max && !slices.Contains(urls, u) {
			urls = append(urls, u)
		}
	}
	return exitStatus(out), errors, urls
}

func (x *extractor) test(name string, pass bool, base Event) {
	e := base
	e.Kind, e.Text, e.Status = Test, name, Fail
	if pass {
		e.Status = Pass
	}
	x.add(e)
}

func (x *extractor) urls(text string, base Event) {
	for _, u := range urlRe.FindAllString(scanWindow(text), -1) {
		u = strings.TrimRight(u, ".,;:!?")
		e := base
		e.Kind, e.Text = URL, u
		x.add(e)
	}
}

// TestLines returns the lines of an output that name a test with its
// result (pytest, unittest, Go), verbatim as Extract reads them, failing
// ones first, then in order, at most max: a pruned output's stand-in keeps
// them, so the tests it ran survive its masking. It reads the output's
// head and tail as Extract does. A line longer than MaxURL (a pytest id
// with a long parameter) is left out, never cut, so the lines take at most
// max*MaxURL bytes; the work is linear in the scan window (a verbose run
// names thousands of tests: each line is looked up once, and each list
// stops at max).
func TestLines(out string, max int) []string {
	out = scanWindow(out)
	var failed, passed []string
	seen := map[string]bool{}
	add := func(line string, pass bool) {
		line = strings.TrimSpace(line)
		list := &failed
		if pass {
			list = &passed
		}
		if len(*list) >= max || len(line) > MaxURL || seen[line] {
			return
		}
		seen[line] = true
		*list = append(*list, line)
	}
	eachTest(out, func(line, _ string, pass bool) { add(line, pass) })
	all := append(failed, passed...)
	return all[:min(len(all), max)]
}

// eachTest calls f with every line of out that names a test with its
// result (pytest, unittest, Go): the line, the test's name and whether it
// passed — one verdict rule for the probes (Extract) and a pruned
// output's test lines (TestLines).
func eachTest(out string, f func(line, name string, pass bool)) {
	for _, m := range pytestRe.FindAllStringSubmatch(out, -1) {
		name, verdict := m[1], m[2]
		if name == "" {
			name, verdict = m[4], m[3]
		}
		f(m[0], name, verdict == "PASSED" || verdict == "XFAIL")
	}
	for _, m := range unittestRe.FindAllStringSubmatch(out, -1) {
		if m[1] != "" {
			f(m[0], m[1]+" ("+m[2]+")", m[3] == "ok" || m[3] == "expected failure" || m[3] == "skipped")
		} else {
			f(m[0], m[5]+" ("+m[6]+")", false)
		}
	}
	for _, m := range goTestRe.FindAllStringSubmatch(out, -1) {
		f(m[0], m[2], m[1] == "PASS")
	}
}
