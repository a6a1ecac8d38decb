package contextctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// sessionIDsCommand is the hidden command shell completion calls: the
// tenant's session ids, one a line.
const sessionIDsCommand = "__sessions"

// maxStdinBytes bounds what append and prepare read from stdin or a file;
// the server refuses larger requests anyway (CONTEXTD_MAX_MESSAGE_BYTES).
const maxStdinBytes = 64 << 20

// runSessionCommand runs the commands that drive a session the way an agent
// does (create, append, prepare, report) and those that read its history
// (messages, compactions), and delete. It reports whether cmd was one of
// them.
func (c *cli) runSessionCommand(ctx context.Context, cmd string, pos []string, need func(int, string) error, term terminal) (bool, error) {
	o := c.o
	switch cmd {
	case "create":
		if err := need(1, "SESSION"); err != nil {
			return true, err
		}
		return true, c.create(ctx, pos[0], term)
	case "append", "prepare":
		if len(pos) < 1 {
			return true, usageError{cmd + " takes SESSION [TEXT...|-]"}
		}
		msgs, err := c.messagesFrom(pos[1:])
		if err != nil {
			return true, err
		}
		if cmd == "append" {
			return true, c.appendMessages(ctx, pos[0], msgs, term)
		}
		return true, c.prepare(ctx, pos[0], msgs, term)
	case "report":
		if err := need(1, "SESSION"); err != nil {
			return true, err
		}
		req := &contextdv1.ReportUsageRequest{SessionId: pos[0], InputTokens: *o.input, OutputTokens: *o.output,
			CacheReadInputTokens: *o.cacheRead, CacheCreationInputTokens: *o.cacheWrite}
		if *o.viewToken != "" {
			req.Request = &contextdv1.ReportUsageRequest_ViewToken{ViewToken: *o.viewToken}
		}
		resp, err := c.client.ReportUsage(ctx, req)
		if err != nil {
			return true, err
		}
		if *o.asJSON {
			return true, c.printJSON(resp)
		}
		fmt.Fprintf(c.out, "reported to %s: %s input (%s cache reads, %s cache writes), %s output\n", pos[0], comma(*o.input),
			comma(*o.cacheRead), comma(*o.cacheWrite), comma(*o.output))
		fmt.Fprint(c.out, Render(FromUsage(resp.GetUsage()), term.width, term.color))
		return true, nil
	case "messages":
		if err := need(1, "SESSION"); err != nil {
			return true, err
		}
		return true, c.messages(ctx, pos[0])
	case "compactions":
		if err := need(1, "SESSION"); err != nil {
			return true, err
		}
		return true, c.compactions(ctx, pos[0])
	case "delete":
		if err := need(1, "SESSION"); err != nil {
			return true, err
		}
		resp, err := c.client.DeleteSession(ctx, &contextdv1.DeleteSessionRequest{SessionId: pos[0]})
		if err != nil {
			return true, err
		}
		if *o.asJSON {
			return true, c.printJSON(resp)
		}
		fmt.Fprintf(c.out, "deleted %s\n", pos[0])
		return true, nil
	case sessionIDsCommand:
		req := &contextdv1.ListSessionsRequest{PageSize: 1000}
		for {
			resp, err := c.client.ListSessions(ctx, req)
			if err != nil {
				return true, err
			}
			for _, s := range resp.GetSessions() {
				fmt.Fprintln(c.out, s.GetId())
			}
			if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
				return true, nil
			}
		}
	}
	return false, nil
}

func (c *cli) create(ctx context.Context, id string, term terminal) error {
	o := c.o
	if *o.model == "" {
		return usageError{"create takes --model"}
	}
	req := &contextdv1.CreateSessionRequest{Id: id, Model: *o.model, SystemPrompt: *o.system}
	if *o.systemFile != "" {
		if *o.system != "" {
			return usageError{"give --system or --system-file, not both"}
		}
		b, err := os.ReadFile(*o.systemFile)
		if err != nil {
			return err
		}
		req.SystemPrompt = string(b)
	}
	if *o.toolsFile != "" {
		tools, err := readTools(*o.toolsFile)
		if err != nil {
			return err
		}
		req.Tools = tools
	}
	if *o.labels != "" {
		labels, err := parseLabels(*o.labels)
		if err != nil {
			return err
		}
		req.Labels = labels
	}
	resp, err := c.client.CreateSession(ctx, req)
	if err != nil {
		return err
	}
	if *o.asJSON {
		return c.printJSON(resp)
	}
	s := resp.GetSession()
	fmt.Fprintf(c.out, "created %s (%s, %s-token window); version %d\n", s.GetId(), s.GetModel(), comma(s.GetUsage().GetContextWindow()), s.GetVersion())
	for _, w := range s.GetUsage().GetWarnings() {
		fmt.Fprintln(c.out, "warning:", w)
	}
	fmt.Fprint(c.out, Render(FromUsage(s.GetUsage()), term.width, term.color))
	return nil
}

// readTools reads a JSON array of tool definitions (proto3 JSON: name,
// description, parametersJson).
func readTools(path string) ([]*contextdv1.ToolDefinition, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, usageError{fmt.Sprintf("--tools-file %s: want a JSON array of tool definitions: %v", path, err)}
	}
	tools := make([]*contextdv1.ToolDefinition, len(raw))
	for i, r := range raw {
		tools[i] = &contextdv1.ToolDefinition{}
		if err := protojson.Unmarshal(r, tools[i]); err != nil {
			return nil, usageError{fmt.Sprintf("--tools-file %s: tool %d: %v", path, i, err)}
		}
	}
	return tools, nil
}

func parseLabels(s string) (map[string]string, error) {
	labels := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, usageError{fmt.Sprintf("--labels: %q is not key=value", kv)}
		}
		labels[k] = v
	}
	return labels, nil
}

// messagesFrom builds the messages of append or prepare: the words of
// args as one message's text, or --file's content, with --role; or, when
// args is "-", the JSON on stdin — one message, an array of messages, or an
// object with "messages" (as the API's AppendMessagesRequest), in proto3
// JSON ({"role": "ROLE_USER", "parts": [{"text": {"text": "..."}}]}).
func (c *cli) messagesFrom(args []string) ([]*contextdv1.Message, error) {
	o := c.o
	if len(args) == 1 && args[0] == "-" {
		if *o.file != "" {
			return nil, usageError{"give - (JSON on stdin) or --file, not both"}
		}
		b, err := io.ReadAll(io.LimitReader(c.in, maxStdinBytes+1))
		if err != nil {
			return nil, err
		}
		if len(b) > maxStdinBytes {
			return nil, usageError{fmt.Sprintf("stdin holds more than %d bytes", maxStdinBytes)}
		}
		return parseMessagesJSON(b)
	}
	roles := map[string]contextdv1.Role{"user": contextdv1.Role_ROLE_USER, "assistant": contextdv1.Role_ROLE_ASSISTANT,
		"system": contextdv1.Role_ROLE_SYSTEM}
	role, ok := roles[*o.role]
	if !ok {
		return nil, usageError{"--role is user, assistant or system (a tool result goes as JSON on stdin: -)"}
	}
	var text string
	switch {
	case *o.file != "" && len(args) > 0:
		return nil, usageError{"give TEXT or --file, not both"}
	case *o.file == "-":
		b, err := io.ReadAll(io.LimitReader(c.in, maxStdinBytes+1))
		if err != nil {
			return nil, err
		}
		text = string(b)
	case *o.file != "":
		b, err := os.ReadFile(*o.file)
		if err != nil {
			return nil, err
		}
		text = string(b)
	case len(args) > 0:
		text = strings.Join(args, " ")
	default:
		return nil, nil
	}
	return []*contextdv1.Message{{Role: role, Parts: []*contextdv1.Part{{Kind: &contextdv1.Part_Text{Text: &contextdv1.TextPart{Text: text}}}}}}, nil
}

func parseMessagesJSON(b []byte) ([]*contextdv1.Message, error) {
	b = bytes.TrimSpace(b)
	bad := func(err error) error {
		return usageError{fmt.Sprintf("stdin: want a message, an array of messages or {\"messages\": [...]} in proto3 JSON: %v", err)}
	}
	switch {
	case len(b) > 0 && b[0] == '[':
		var raw []json.RawMessage
		if err := json.Unmarshal(b, &raw); err != nil {
			return nil, bad(err)
		}
		msgs := make([]*contextdv1.Message, len(raw))
		for i, r := range raw {
			msgs[i] = &contextdv1.Message{}
			if err := protojson.Unmarshal(r, msgs[i]); err != nil {
				return nil, bad(fmt.Errorf("message %d: %w", i, err))
			}
		}
		return msgs, nil
	case len(b) > 0 && b[0] == '{':
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(b, &keys); err != nil {
			return nil, bad(err)
		}
		if _, ok := keys["messages"]; ok {
			var req contextdv1.AppendMessagesRequest
			if err := protojson.Unmarshal(b, &req); err != nil {
				return nil, bad(err)
			}
			return req.GetMessages(), nil
		}
		m := &contextdv1.Message{}
		if err := protojson.Unmarshal(b, m); err != nil {
			return nil, bad(err)
		}
		return []*contextdv1.Message{m}, nil
	}
	return nil, bad(fmt.Errorf("stdin is empty or not JSON"))
}

func (c *cli) appendMessages(ctx context.Context, id string, msgs []*contextdv1.Message, term terminal) error {
	o := c.o
	if len(msgs) == 0 {
		return usageError{"append takes a message: TEXT, --file FILE, or - for JSON on stdin"}
	}
	req := &contextdv1.AppendMessagesRequest{SessionId: id, Messages: msgs, IdempotencyKey: *o.idempotencyKey}
	if *o.expected >= 0 {
		req.ExpectedVersion = o.expected
	}
	resp, err := c.client.AppendMessages(ctx, req)
	if err != nil {
		return err
	}
	if *o.asJSON {
		return c.printJSON(resp)
	}
	stored := resp.GetMessages()
	ids := make([]string, len(stored))
	var tokens int64
	for i, m := range stored {
		ids[i] = m.GetId()
		tokens += m.GetTokens()
	}
	fmt.Fprintf(c.out, "appended %d message(s) to %s (%s; %s tokens); version %d\n", len(stored), id, strings.Join(ids, ", "), comma(tokens), resp.GetVersion())
	for _, w := range resp.GetUsage().GetWarnings() {
		fmt.Fprintln(c.out, "warning:", w)
	}
	fmt.Fprint(c.out, Render(FromUsage(resp.GetUsage()), term.width, term.color))
	return nil
}

func (c *cli) prepare(ctx context.Context, id string, msgs []*contextdv1.Message, term terminal) error {
	o := c.o
	req := &contextdv1.PrepareContextRequest{SessionId: id, Messages: msgs, IdempotencyKey: *o.idempotencyKey}
	if *o.expected >= 0 {
		req.ExpectedVersion = o.expected
	}
	resp, err := c.client.PrepareContext(ctx, req)
	if err != nil {
		return err
	}
	if *o.asJSON {
		return c.printJSON(resp)
	}
	st := resp.GetStatus()
	var tokens int64
	for _, m := range resp.GetMessages() {
		tokens += m.GetTokens()
	}
	fmt.Fprintf(c.out, "%s: send %d message(s), %s tokens of messages; version %d\n", id, len(resp.GetMessages()), comma(tokens), st.GetVersion())
	if st.GetCompacted() {
		lc := st.GetLastCompaction()
		fmt.Fprintf(c.out, "compacted: %s (%s), %s → %s tokens; undo with: contextctl revert %s %s\n", lc.GetId(),
			strings.Join(lc.GetTiers(), " + "), comma(lc.GetTokensBefore()), comma(lc.GetTokensAfter()), id, lc.GetId())
	}
	if ch := resp.GetCache(); ch.GetHasPrevious() {
		fmt.Fprintf(c.out, "prompt cache: the first %d message(s), %s tokens with system prompt and tools, are as in the previous answer\n",
			ch.GetStablePrefixMessages(), comma(ch.GetStablePrefixTokens()))
	}
	for _, w := range st.GetWarnings() {
		fmt.Fprintln(c.out, "warning:", w)
	}
	fmt.Fprintf(c.out, "view token (for report --view-token): %s\n", resp.GetViewToken())
	fmt.Fprint(c.out, Render(FromUsage(st.GetUsage()), term.width, term.color))
	return nil
}

// messages prints the active view (or the log), following page tokens;
// --json prints one response holding every page's messages.
func (c *cli) messages(ctx context.Context, id string) error {
	req := &contextdv1.GetMessagesRequest{SessionId: id}
	if *c.o.log {
		req.View = contextdv1.MessageView_MESSAGE_VIEW_LOG
	}
	all := &contextdv1.GetMessagesResponse{}
	for {
		resp, err := c.client.GetMessages(ctx, req)
		if err != nil {
			return err
		}
		all.Version = resp.GetVersion()
		if *c.o.asJSON {
			all.Messages = append(all.Messages, resp.GetMessages()...)
		} else {
			for _, m := range resp.GetMessages() {
				printMessage(c.out, m)
			}
		}
		if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
			break
		}
	}
	if *c.o.asJSON {
		return c.printJSON(all)
	}
	return nil
}

// compactions prints the compaction history as a table, following page
// tokens; --json prints one response holding every page's compactions.
func (c *cli) compactions(ctx context.Context, id string) error {
	req := &contextdv1.ListCompactionsRequest{SessionId: id}
	all := &contextdv1.ListCompactionsResponse{}
	tw := tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
	if !*c.o.asJSON {
		fmt.Fprintln(tw, "COMPACTION\tROUND\tTIERS\tTOKENS\tCREATED\tSTATE")
	}
	n := 0
	for {
		resp, err := c.client.ListCompactions(ctx, req)
		if err != nil {
			return err
		}
		for _, cmp := range resp.GetCompactions() {
			n++
			if *c.o.asJSON {
				all.Compactions = append(all.Compactions, cmp)
				continue
			}
			state := "applied"
			switch exp := cmp.GetExpiresAt(); {
			case cmp.GetRevertedAt() != nil:
				state = "reverted " + cmp.GetRevertedAt().AsTime().Local().Format(time.DateTime)
			case exp != nil && exp.AsTime().After(time.Now()):
				state = "applied, revertible until " + exp.AsTime().Local().Format(time.DateTime)
			case exp != nil:
				state = "applied (revert window over)"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s → %s\t%s\t%s\n", cmp.GetId(), cmp.GetRound(), strings.Join(cmp.GetTiers(), "+"),
				comma(cmp.GetTokensBefore()), comma(cmp.GetTokensAfter()), cmp.GetCreatedAt().AsTime().Local().Format(time.DateTime), state)
		}
		if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
			break
		}
	}
	if *c.o.asJSON {
		return c.printJSON(all)
	}
	if n == 0 {
		fmt.Fprintf(c.out, "%s has no compactions\n", id)
		return nil
	}
	return tw.Flush()
}
