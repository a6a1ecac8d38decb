package main

import (
	"slices"
	"testing"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// TestSentContent: a log message whose key is right but whose text, role
// or parts are not what the agent sent is found (the keys alone, all the
// linearizability check sees, would pass it), as is one no agent sent.
func TestSentContent(t *testing.T) {
	var c sentContent
	user := contextdv1.Role_ROLE_USER
	c.add([]*contextdv1.Message{textMessage(user, "«a1.s0.t0.u» fix the parser"), textMessage(contextdv1.Role_ROLE_ASSISTANT, "«a1.s0.t1.r» done")})
	truncated := textMessage(user, "«a1.s0.t0.u» fix the")
	asUser := textMessage(user, "«a1.s0.t1.r» done")
	extra := textMessage(contextdv1.Role_ROLE_ASSISTANT, "«a1.s0.t1.r» done")
	extra.Parts = append(extra.Parts, extra.Parts[0])
	log := []*contextdv1.Message{
		textMessage(user, "«a1.s0.t0.u» fix the parser"), truncated, asUser, extra,
		textMessage(user, "«a9.s9.t9.u» never sent"), textMessage(user, "«g1.c0.t0» a gateway turn"),
	}
	differ, unsent := c.check(log)
	if want := []string{"«a1.s0.t0.u»", "«a1.s0.t1.r»", "«a1.s0.t1.r»"}; !slices.Equal(differ, want) {
		t.Errorf("differ %v, want %v", differ, want)
	}
	if want := []string{"«a9.s9.t9.u»"}; !slices.Equal(unsent, want) {
		t.Errorf("unsent %v, want %v", unsent, want)
	}
}
