package compaction

import "strconv"

// ExpandToolName is the tool a model calls to read what a placeholder or
// summary stands for, when the policy exposes it (Policy.ExposeExpandTool).
const ExpandToolName = "contextd_expand"

// Expander is what the model reading a view can call to read what a
// placeholder or summary stands for; the wording of every placeholder and
// summary header follows it, so a model is never told to make a call it
// cannot make. Each wording names the id, so a view written with the tool
// off reads with the tool once it is turned on (the tool's description
// says to pass the id the text names).
type Expander int

const (
	// ExpandByRPC: the agent's runtime offers ExpandMessage to its model as
	// a tool, as docs/api.md tells API users to ("Call ExpandMessage with
	// message id msg_12 to read it.").
	ExpandByRPC Expander = iota
	// ExpandByTool: the view carries contextd_expand ("Call contextd_expand
	// with id "msg_12" to read it.").
	ExpandByTool
	// ExpandByNone: the model can call nothing that expands (the gateway
	// with the tool off): the text names the id for an operator or a
	// runtime ("Its id is msg_12."; a summary's fold line, after a list
	// of ids, "Id sum_2_1 holds what they came from."), and a tool's
	// pruned output says to make the call again ("Its id is msg_12;
	// rerun the call if needed.").
	ExpandByNone
)

// Expander is the wording the policy's placeholders and summaries take.
func (p Policy) Expander() Expander {
	switch {
	case p.ExposeExpandTool:
		return ExpandByTool
	case p.NoExpandRPC:
		return ExpandByNone
	}
	return ExpandByRPC
}

// ReadOn is the sentence of a placeholder or summary (or a summary's line,
// internal/summarize) that says how to read what stands behind id ("it" or
// "them": what), in e's wording.
func ReadOn(e Expander, id, what string) string {
	switch e {
	case ExpandByTool:
		// The id quoted as the model writes it in the tool's arguments.
		return "Call " + ExpandToolName + ` with id "` + id + `" to read ` + what + "."
	case ExpandByNone:
		if what == "it" || what == "them" { // what the text that says it stands for
			return "Its id is " + id + "."
		}
		// A phrase, as a summary's fold line ends with after a list of
		// ids ("from msg_3, msg_9."), where "its" would read as the last's.
		return "Id " + id + " holds " + what + "."
	}
	return "Call ExpandMessage with message id " + id + " to read " + what + "."
}

// readOutput is ReadOn for a tool's output: with nothing to expand by, the
// model can make the call again (14 tokens, one more than the
// ExpandMessage sentence: masking pays for it in every call).
func readOutput(e Expander, id, what string) string {
	if e == ExpandByNone {
		return "Its id is " + id + "; rerun the call if needed."
	}
	return ReadOn(e, id, what)
}

// SummaryHeader is the first line of a summary: what it is and how to read
// the messages it stands for. id is the summary's own id; e is the
// wording (Policy.Expander).
func SummaryHeader(round int, id string, e Expander) string {
	s := ReadOn(e, id, "them")
	return "[contextd summary, round " + strconv.Itoa(round) + ". It stands in for earlier messages of this conversation; " +
		string(s[0]-'A'+'a') + s[1:] + "]\n"
}
