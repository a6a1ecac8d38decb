package compaction

import "strconv"

// ExpandToolName is the tool a model calls to read what a placeholder or
// summary stands for, when the policy exposes it (Policy.ExposeExpandTool).
const ExpandToolName = "contextd_expand"

// expandCall is the sentence of a placeholder or summary that says how to
// read what stands behind id: with the tool when the policy exposes it (the
// id quoted as the model writes it in the tool's arguments), otherwise with
// the ExpandMessage RPC. Both name the id, so a view written with the
// option off reads with the tool once it is turned on (the tool's
// description says to pass the id either wording names).
func expandCall(tool bool, id string) string {
	if tool {
		return "Call " + ExpandToolName + ` with id "` + id + `"`
	}
	return "Call ExpandMessage with message id " + id
}

// SummaryHeader is the first line of a summary: what it is and how to read
// the messages it stands for. id is the summary's own id; tool says whether
// the policy exposes the expand tool (the wording of expandCall).
func SummaryHeader(round int, id string, tool bool) string {
	return "[contextd summary, round " + strconv.Itoa(round) + ". It stands in for earlier messages of this conversation; " +
		"c" + expandCall(tool, id)[1:] + " to read them.]\n"
}
