package app

import (
	"fmt"
	"strings"
	"testing"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// TestExpandAndCompactionPagesAreByteBounded: the originals behind a summary
// of ten 450 KB messages come over several ExpandMessage pages, each within a
// default client's 4 MB receive limit (CONTEXTD_MAX_RESPONSE_BYTES), every
// original once, in order; ListCompactions pages with page_size and its
// token too. Without the cut the first ExpandMessage would exceed 4 MB.
func TestExpandAndCompactionPagesAreByteBounded(t *testing.T) {
	conn := startServer(t, map[string]string{})
	client := contextdv1.NewContextServiceClient(conn)
	ctx := t.Context()
	off, keep, keepTokens := false, int32(1), int64(0)
	// keep_human_tokens 0: the large user messages are all summarized (by
	// default the newest that fit in a quarter of the window stay).
	if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "big", Model: "gpt-4.1",
		Policy: &contextdv1.CompactionPolicy{AutoCompact: &off, KeepRecentMessages: &keep, KeepRecentTokens: &keepTokens, KeepHumanTokens: &keepTokens}}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "big", Messages: []*contextdv1.Message{user("task:")}}); err != nil {
		t.Fatal(err)
	}
	const n = 10
	for i := 0; i < n; i += 2 {
		var msgs []*contextdv1.Message
		for j := i; j < i+2; j++ {
			msgs = append(msgs, user(fmt.Sprintf("%d:", j)+strings.Repeat("word ", 450<<10/5)))
		}
		if _, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "big", Messages: msgs}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "big", Messages: []*contextdv1.Message{user("last:")}}); err != nil {
		t.Fatal(err)
	}
	resp, err := client.Compact(ctx, &contextdv1.CompactRequest{SessionId: "big", Tier: contextdv1.CompactionTier_COMPACTION_TIER_SUMMARIZE})
	if err != nil || !resp.GetCompacted() {
		t.Fatalf("compact: %v, %v", resp, err)
	}
	var summaryID string
	for _, it := range resp.GetCompaction().GetItems() {
		if len(it.GetReplacedMessageIds()) == n {
			summaryID = it.GetNewMessageId()
		}
	}
	if summaryID == "" {
		t.Fatalf("no item replaced the %d large messages: %v", n, resp.GetCompaction().GetItems())
	}
	var got []string
	pages := 0
	for token := ""; ; pages++ {
		x, err := client.ExpandMessage(ctx, &contextdv1.ExpandMessageRequest{SessionId: "big", MessageId: summaryID, PageToken: token})
		if err != nil {
			t.Fatalf("expand page %d: %v", pages, err)
		}
		if x.GetMessage().GetId() != summaryID {
			t.Fatalf("page %d: message %q", pages, x.GetMessage().GetId())
		}
		for _, m := range x.GetOriginals() {
			prefix, _, _ := strings.Cut(m.GetParts()[0].GetText().GetText(), ":")
			got = append(got, prefix)
		}
		if token = x.GetNextPageToken(); token == "" {
			break
		}
	}
	if want := "0 1 2 3 4 5 6 7 8 9"; strings.Join(got, " ") != want || pages < 1 {
		t.Errorf("%d pages of originals %v; want every original once, in order, over several pages", pages+1, got)
	}
	if _, err := client.ExpandMessage(ctx, &contextdv1.ExpandMessageRequest{SessionId: "big", MessageId: summaryID, PageToken: "bm9wZQ"}); err == nil || !strings.Contains(err.Error(), "page_token") {
		t.Errorf("a foreign page_token: %v; want InvalidArgument naming page_token", err)
	}

	// A second compaction, then one compaction per page.
	var more []*contextdv1.Message
	for i := range 5 {
		more = append(more, user(fmt.Sprintf("more %d: ", i)+strings.Repeat("word ", 1000)))
	}
	if _, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "big", Messages: more}); err != nil {
		t.Fatal(err)
	}
	low := 0.001
	if resp, err := client.Compact(ctx, &contextdv1.CompactRequest{SessionId: "big", Tier: contextdv1.CompactionTier_COMPACTION_TIER_SUMMARIZE, Target: &low}); err != nil || !resp.GetCompacted() {
		t.Fatalf("second compact: %v, %v", resp, err)
	}
	var ids []string
	for token := ""; ; {
		list, err := client.ListCompactions(ctx, &contextdv1.ListCompactionsRequest{SessionId: "big", PageSize: 1, PageToken: token})
		if err != nil || len(list.GetCompactions()) != 1 {
			t.Fatalf("list: %v, %v", list, err)
		}
		ids = append(ids, list.GetCompactions()[0].GetId())
		if token = list.GetNextPageToken(); token == "" {
			break
		}
	}
	all, err := client.ListCompactions(ctx, &contextdv1.ListCompactionsRequest{SessionId: "big"})
	if err != nil || len(all.GetCompactions()) != 2 || all.GetNextPageToken() != "" || len(ids) != 2 ||
		ids[0] != all.GetCompactions()[0].GetId() || ids[1] != all.GetCompactions()[1].GetId() {
		t.Errorf("paged %v, whole %v (%v); want the same two compactions, oldest first", ids, all, err)
	}
}
