package contextctl

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/term"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// options are contextctl's flags: one set, so that any flag may come before
// or after the command and its arguments; command.checkFlags refuses one
// given with a command it does not apply to.
type options struct {
	addr, token, caFile, certFile, keyFile, serverName *string
	useTLS, asJSON, noColor                            *bool
	width                                              *int
	model, encoding, tier, instructions, newID, label  *string
	system, systemFile, labels, toolsFile              *string
	role, file, idempotencyKey, viewToken              *string
	dryRun, newSession, keepTask, log                  *bool
	target                                             *float64
	expected, input, output, cacheRead, cacheWrite     *int64
}

func defineFlags(fs *flag.FlagSet) *options {
	return &options{
		addr:           fs.String("addr", envOr("CONTEXTD_ADDR", "localhost:50051"), "server `HOST:PORT` (default $CONTEXTD_ADDR, else localhost:50051)"),
		token:          fs.String("token", "", "API `KEY`, sent as a bearer token (default $CONTEXTD_TOKEN)"),
		useTLS:         fs.Bool("tls", false, "use TLS"),
		caFile:         fs.String("ca-file", "", "CA certificates (PEM `FILE`) to trust"),
		certFile:       fs.String("cert-file", "", "client certificate (PEM `FILE`)"),
		keyFile:        fs.String("key-file", "", "client key (PEM `FILE`)"),
		serverName:     fs.String("server-name", "", "TLS server `NAME` override"),
		asJSON:         fs.Bool("json", false, "print the server's answer as JSON (proto3 JSON), for scripts"),
		noColor:        fs.Bool("no-color", os.Getenv("NO_COLOR") != "", "no ANSI colours (default: on when $NO_COLOR is set)"),
		width:          fs.Int("width", 0, "terminal width in `COLUMNS` (default: detected, else 80)"),
		model:          fs.String("model", "", "`MODEL`: the session's model; count: whose encoding to use"),
		encoding:       fs.String("encoding", "", "`ENCODING` to count with (o200k_base, cl100k_base, ...)"),
		dryRun:         fs.Bool("dry-run", false, "plan only: what a compaction would do, nothing changes"),
		tier:           fs.String("tier", "", "`TIER`: prune, summarize or drop_middle (default: automatic)"),
		instructions:   fs.String("instructions", "", "`TEXT`: instructions for the summarizer"),
		target:         fs.Float64("target", 0, "target `FRACTION` of the usable window (default: the policy's)"),
		newSession:     fs.Bool("new-session", false, "start a new session seeded with the hand-off document"),
		newID:          fs.String("new-id", "", "`ID` of the new session"),
		label:          fs.String("label", "", "only sessions with this `KEY=VALUE` label"),
		system:         fs.String("system", "", "system prompt `TEXT`"),
		systemFile:     fs.String("system-file", "", "`FILE` holding the system prompt"),
		labels:         fs.String("labels", "", "labels `K=V,K=V` (update: empty means none)"),
		toolsFile:      fs.String("tools-file", "", "`FILE` of tool definitions: a JSON array of {name, description, parametersJson}"),
		keepTask:       fs.Bool("keep-task", false, "keep the original task (the first user message)"),
		expected:       fs.Int64("expected-version", -1, "act only if the session is at this `VERSION` (else Aborted, exit 1)"),
		role:           fs.String("role", "user", "`ROLE` of a TEXT or --file message: user, assistant or system"),
		file:           fs.String("file", "", "`FILE` whose content is the message's text (- for stdin)"),
		idempotencyKey: fs.String("idempotency-key", "", "`KEY` that makes a retry of the same append safe"),
		log:            fs.Bool("log", false, "the whole log instead of the active view"),
		input:          fs.Int64("input", 0, "uncached input `TOKENS` the provider billed"),
		output:         fs.Int64("output", 0, "output `TOKENS` the provider billed"),
		cacheRead:      fs.Int64("cache-read", 0, "input `TOKENS` read from the prompt cache"),
		cacheWrite:     fs.Int64("cache-write", 0, "input `TOKENS` written to the prompt cache"),
		viewToken:      fs.String("view-token", "", "the view_token of the PrepareContext answer the call sent (`TOKEN`; default: the session's latest view)"),
	}
}

// parseAnywhere parses flags wherever they are among the arguments and
// returns the positional ones in order; everything after "--" is
// positional.
func parseAnywhere(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for i, a := range args {
		if a == "--" {
			args, rest = args[:i], args[i+1:]
			break
		}
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return append(pos, rest...), nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// Main runs contextctl with args (without the program name) and returns the
// exit code (see the exit* constants).
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("contextctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	o := defineFlags(fs)
	pos, err := parseAnywhere(fs, args)
	if errors.Is(err, flag.ErrHelp) || (err == nil && len(pos) > 0 && pos[0] == "help") {
		fmt.Fprint(stdout, usage(fs))
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "contextctl: %v (contextctl --help lists the commands and flags)\n", err)
		return exitUsage
	}
	if len(pos) == 0 {
		fmt.Fprint(stderr, usage(fs))
		return exitUsage
	}
	cmd, ok := lookupCommand(pos[0])
	if !ok && pos[0] != sessionIDsCommand {
		fmt.Fprintf(stderr, "contextctl: unknown command %q (see contextctl --help)\n", pos[0])
		return exitUsage
	}
	if err := cmd.checkFlags(fs); err != nil {
		fmt.Fprintln(stderr, "contextctl:", err)
		return exitUsage
	}
	if cmd.name == "completion" {
		return completion(fs, pos[1:], stdout, stderr)
	}
	if *o.token == "" {
		*o.token = os.Getenv("CONTEXTD_TOKEN")
	}
	creds, err := transportCredentials(*o.useTLS, *o.caFile, *o.certFile, *o.keyFile, *o.serverName)
	if err != nil {
		fmt.Fprintln(stderr, "contextctl:", err)
		return exitUsage
	}
	conn, err := grpc.NewClient(*o.addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		fmt.Fprintln(stderr, "contextctl:", err)
		return exitUsage
	}
	defer conn.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *o.token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+*o.token)
	}
	c := &cli{client: contextdv1.NewContextServiceClient(conn), out: stdout, err: stderr, in: os.Stdin, fs: fs, o: o}
	if err := c.run(ctx, pos[0], pos[1:]); err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintln(stderr, "contextctl:", err)
			return exitUsage
		}
		if st, ok := status.FromError(err); ok {
			fmt.Fprintf(stderr, "contextctl: %s: %s\n", st.Code(), st.Message())
			if st.Code() == codes.Unavailable {
				return exitUnreachable
			}
		} else {
			fmt.Fprintln(stderr, "contextctl:", err)
		}
		return exitFailed
	}
	return exitOK
}

type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func transportCredentials(useTLS bool, caFile, certFile, keyFile, serverName string) (credentials.TransportCredentials, error) {
	if !useTLS && caFile == "" && certFile == "" {
		return insecure.NewCredentials(), nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
		}
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return credentials.NewTLS(cfg), nil
}

type cli struct {
	client contextdv1.ContextServiceClient
	out    io.Writer
	err    io.Writer
	in     io.Reader
	fs     *flag.FlagSet
	o      *options
}

func (c *cli) run(ctx context.Context, cmd string, pos []string) error {
	o := c.o
	asJSON, noColor, width, model, encoding := o.asJSON, o.noColor, o.width, o.model, o.encoding
	dryRun, tier, instructions, target := o.dryRun, o.tier, o.instructions, o.target
	newSession, newID, label, system, systemFile, labels := o.newSession, o.newID, o.label, o.system, o.systemFile, o.labels
	keepTask, expected := o.keepTask, o.expected
	fs := c.fs
	need := func(n int, names string) error {
		if len(pos) != n {
			return usageError{fmt.Sprintf("%s takes %s", cmd, names)}
		}
		return nil
	}
	term := c.terminal(*width, *noColor)
	if handled, err := c.runSessionCommand(ctx, cmd, pos, need, term); handled {
		return err
	}
	switch cmd {
	case "count":
		return c.count(ctx, pos, *model, *encoding, *asJSON)
	case "usage":
		if err := need(1, "SESSION"); err != nil {
			return err
		}
		resp, err := c.client.GetContextUsage(ctx, &contextdv1.GetContextUsageRequest{Source: &contextdv1.GetContextUsageRequest_SessionId{SessionId: pos[0]}})
		if err != nil {
			return err
		}
		if *asJSON {
			return c.printJSON(resp.GetUsage())
		}
		fmt.Fprint(c.out, Render(FromUsage(resp.GetUsage()), term.width, term.color))
		if term.width >= narrowWidth {
			sess, err := c.client.GetSession(ctx, &contextdv1.GetSessionRequest{SessionId: pos[0]})
			if err != nil {
				return err
			}
			fmt.Fprint(c.out, RenderLedger(sess.GetSession().GetLedger()))
		}
		return nil
	case "watch":
		if err := need(1, "SESSION"); err != nil {
			return err
		}
		return c.watch(ctx, pos[0], term, *asJSON)
	case "compact":
		if err := need(1, "SESSION"); err != nil {
			return err
		}
		tiers := map[string]contextdv1.CompactionTier{"": contextdv1.CompactionTier_COMPACTION_TIER_UNSPECIFIED,
			"prune": contextdv1.CompactionTier_COMPACTION_TIER_PRUNE, "summarize": contextdv1.CompactionTier_COMPACTION_TIER_SUMMARIZE,
			"drop_middle": contextdv1.CompactionTier_COMPACTION_TIER_DROP_MIDDLE}
		t, ok := tiers[*tier]
		if !ok {
			return usageError{"--tier is prune, summarize or drop_middle"}
		}
		req := &contextdv1.CompactRequest{SessionId: pos[0], Tier: t, DryRun: *dryRun, Instructions: *instructions}
		if *target > 0 {
			req.Target = target
		}
		resp, err := c.client.Compact(ctx, req)
		if err != nil {
			return err
		}
		if *asJSON {
			return c.printJSON(resp)
		}
		c.printCompaction(pos[0], resp)
		fmt.Fprint(c.out, Render(FromUsage(resp.GetUsage()), term.width, term.color))
		return nil
	case "revert":
		if err := need(2, "SESSION COMPACTION_ID"); err != nil {
			return err
		}
		resp, err := c.client.RevertCompaction(ctx, &contextdv1.RevertCompactionRequest{SessionId: pos[0], CompactionId: pos[1]})
		if err != nil {
			return err
		}
		if *asJSON {
			return c.printJSON(resp)
		}
		fmt.Fprintf(c.out, "reverted %s; %s is at version %d\n", pos[1], pos[0], resp.GetSession().GetVersion())
		fmt.Fprint(c.out, Render(FromUsage(resp.GetSession().GetUsage()), term.width, term.color))
		return nil
	case "update":
		if err := need(1, "SESSION"); err != nil {
			return err
		}
		return c.update(ctx, fs, pos[0], *system, *systemFile, *labels, *expected, term, *asJSON)
	case "clear":
		if err := need(1, "SESSION"); err != nil {
			return err
		}
		req := &contextdv1.ClearMessagesRequest{SessionId: pos[0], KeepFirstUserMessage: *keepTask}
		if *expected >= 0 {
			req.ExpectedVersion = expected
		}
		resp, err := c.client.ClearMessages(ctx, req)
		if err != nil {
			return err
		}
		if *asJSON {
			return c.printJSON(resp)
		}
		if cmp := resp.GetCompaction(); cmp != nil {
			fmt.Fprintf(c.out, "cleared %s (%d → %d tokens) as %s; undo with: contextctl revert %s %s\n", pos[0],
				cmp.GetTokensBefore(), cmp.GetTokensAfter(), cmp.GetId(), pos[0], cmp.GetId())
		} else {
			fmt.Fprintf(c.out, "%s: nothing to clear\n", pos[0])
		}
		fmt.Fprint(c.out, Render(FromUsage(resp.GetSession().GetUsage()), term.width, term.color))
		return nil
	case "expand":
		if err := need(2, "SESSION MESSAGE_ID"); err != nil {
			return err
		}
		// The originals come in pages bounded by the server's response
		// byte cap: follow next_page_token, printing each page as it comes
		// (--json prints one response holding them all).
		all := &contextdv1.ExpandMessageResponse{}
		for token, first := "", true; first || token != ""; first = false {
			resp, err := c.client.ExpandMessage(ctx, &contextdv1.ExpandMessageRequest{SessionId: pos[0], MessageId: pos[1], PageToken: token})
			if err != nil {
				return err
			}
			token = resp.GetNextPageToken()
			if *asJSON {
				all.Message, all.Originals = resp.GetMessage(), append(all.Originals, resp.GetOriginals()...)
				continue
			}
			if first && len(resp.GetOriginals()) == 0 {
				fmt.Fprintf(c.out, "%s is an original message:\n\n", pos[1])
				printMessage(c.out, resp.GetMessage())
			}
			for _, m := range resp.GetOriginals() {
				printMessage(c.out, m)
			}
		}
		if *asJSON {
			return c.printJSON(all)
		}
		return nil
	case "handoff":
		if err := need(1, "SESSION"); err != nil {
			return err
		}
		resp, err := c.client.CreateHandoff(ctx, &contextdv1.CreateHandoffRequest{SessionId: pos[0], CreateSession: *newSession, NewSessionId: *newID})
		if err != nil {
			return err
		}
		if *asJSON {
			return c.printJSON(resp)
		}
		fmt.Fprintln(c.out, resp.GetDocument())
		if s := resp.GetSession(); s != nil {
			fmt.Fprintf(c.out, "new session: %s\n", s.GetId())
		}
		return nil
	case "sessions":
		return c.sessions(ctx, *label, *asJSON)
	case "models":
		resp, err := c.client.ListModels(ctx, &contextdv1.ListModelsRequest{})
		if err != nil {
			return err
		}
		if *asJSON {
			return c.printJSON(resp)
		}
		tw := tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "MODEL\tPROVIDER\tWINDOW\tMAX OUTPUT\tENCODING\tCOUNTS")
		for _, m := range resp.GetModels() {
			exact := "exact"
			if !m.GetExact() {
				exact = fmt.Sprintf("approximate ±%.0f%%", 100*m.GetExpectedError())
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.GetName(), m.GetProvider(), comma(m.GetContextWindow()),
				comma(m.GetMaxOutputTokens()), m.GetEncoding(), exact)
		}
		return tw.Flush()
	}
	return usageError{fmt.Sprintf("unknown command %q (see contextctl --help)", cmd)}
}

type terminal struct {
	width int
	color bool
	live  bool // redraw in place
}

func (c *cli) terminal(width int, noColor bool) terminal {
	t := terminal{width: width}
	if f, ok := c.out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		t.color, t.live = !noColor, true
		if t.width == 0 {
			if w, _, err := term.GetSize(int(f.Fd())); err == nil {
				t.width = w
			}
		}
	}
	if t.width <= 0 {
		t.width = 80
	}
	return t
}

func (c *cli) count(ctx context.Context, pos []string, model, encoding string, asJSON bool) error {
	var data []byte
	var err error
	switch {
	case len(pos) == 0 || pos[0] == "-":
		data, err = io.ReadAll(c.in)
	case len(pos) == 1:
		data, err = os.ReadFile(pos[0])
	default:
		return usageError{"count takes at most one FILE"}
	}
	if err != nil {
		return err
	}
	resp, err := c.client.CountTokens(ctx, &contextdv1.CountTokensRequest{Text: string(data), Model: model, Encoding: encoding})
	if err != nil {
		return err
	}
	if asJSON {
		return c.printJSON(resp)
	}
	how := resp.GetEncoding()
	if !resp.GetExact() {
		how += ", approximate"
	}
	fmt.Fprintf(c.out, "%s tokens (%s)\n", comma(resp.GetTotalTokens()), how)
	for _, w := range resp.GetWarnings() {
		fmt.Fprintf(c.out, "  note: %s\n", w)
	}
	return nil
}

func (c *cli) watch(ctx context.Context, id string, t terminal, asJSON bool) error {
	stream, err := c.client.WatchContextStatus(ctx, &contextdv1.WatchContextStatusRequest{SessionId: id, HeartbeatSeconds: 15})
	if err != nil {
		return err
	}
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) || ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		st := resp.GetStatus()
		if st.GetEvent() == contextdv1.StatusEvent_STATUS_EVENT_HEARTBEAT {
			continue
		}
		if asJSON {
			if err := c.printJSON(st); err != nil {
				return err
			}
			continue
		}
		if t.live {
			fmt.Fprint(c.out, "\x1b[H\x1b[2J") // redraw in place
		}
		event := strings.ToLower(strings.TrimPrefix(st.GetEvent().String(), "STATUS_EVENT_"))
		fmt.Fprintf(c.out, "%s · version %d · %s · %s\n", id, st.GetVersion(), event, st.GetTime().AsTime().Local().Format(time.TimeOnly))
		if st.GetUsage() != nil {
			fmt.Fprint(c.out, Render(FromUsage(st.GetUsage()), t.width, t.color))
		}
		for _, w := range st.GetWarnings() {
			fmt.Fprintf(c.out, "warning: %s\n", w)
		}
		if st.GetEvent() == contextdv1.StatusEvent_STATUS_EVENT_DELETED {
			return nil
		}
	}
}

func (c *cli) sessions(ctx context.Context, label string, asJSON bool) error {
	req := &contextdv1.ListSessionsRequest{PageSize: 200}
	if label != "" {
		k, v, ok := strings.Cut(label, "=")
		if !ok {
			return usageError{"--label takes key=value"}
		}
		req.Labels = map[string]string{k: v}
	}
	tw := tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
	if !asJSON {
		fmt.Fprintln(tw, "SESSION\tMODEL\tMESSAGES\tUSED (% OF USABLE WINDOW)\tLEVEL\tUPDATED")
	}
	for {
		resp, err := c.client.ListSessions(ctx, req)
		if err != nil {
			return err
		}
		for _, s := range resp.GetSessions() {
			if asJSON {
				if err := c.printJSON(s); err != nil {
					return err
				}
				continue
			}
			u := s.GetUsage()
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", s.GetId(), s.GetModel(), s.GetMessageCount(),
				fmt.Sprintf("%s (%.0f%%)", comma(u.GetUsedTokens()), u.GetPercentUsed()),
				strings.TrimPrefix(u.GetLevel().String(), "CONTEXT_LEVEL_"), s.GetUpdatedAt().AsTime().Local().Format(time.DateTime))
		}
		if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
			break
		}
	}
	return tw.Flush()
}

func (c *cli) printCompaction(session string, resp *contextdv1.CompactResponse) {
	cmp := resp.GetCompaction()
	switch {
	case cmp == nil && resp.GetNothingDetail() != "":
		fmt.Fprintln(c.out, "nothing to compact:", resp.GetNothingDetail())
	case cmp == nil:
		fmt.Fprintln(c.out, "nothing to compact")
	case resp.GetDryRun():
		fmt.Fprintf(c.out, "dry run: %s would save %s tokens (%s → %s)\n", strings.Join(cmp.GetTiers(), " + "),
			comma(cmp.GetTokensBefore()-cmp.GetTokensAfter()), comma(cmp.GetTokensBefore()), comma(cmp.GetTokensAfter()))
	default:
		fmt.Fprintf(c.out, "compaction %s (%s): %s → %s tokens; revert with: contextctl revert %s %s\n", cmp.GetId(),
			strings.Join(cmp.GetTiers(), " + "), comma(cmp.GetTokensBefore()), comma(cmp.GetTokensAfter()), session, cmp.GetId())
	}
	if cmp != nil {
		for _, it := range cmp.GetItems() {
			fmt.Fprintf(c.out, "  %-11s %-14s replaces %d message(s), %s → %s tokens: %s\n", it.GetTier(), it.GetNewMessageId(),
				len(it.GetReplacedMessageIds()), comma(it.GetTokensBefore()), comma(it.GetTokensAfter()), it.GetReason())
		}
	}
	for _, w := range resp.GetWarnings() {
		fmt.Fprintln(c.out, "warning:", w)
	}
}

func printMessage(w io.Writer, m *contextdv1.Message) {
	fmt.Fprintf(w, "── %s · %s · %s tokens\n", m.GetId(), strings.ToLower(strings.TrimPrefix(m.GetRole().String(), "ROLE_")), comma(m.GetTokens()))
	for _, p := range m.GetParts() {
		switch {
		case p.GetText() != nil:
			fmt.Fprintln(w, p.GetText().GetText())
		case p.GetToolCall() != nil:
			fmt.Fprintf(w, "→ %s(%s) [%s]\n", p.GetToolCall().GetName(), p.GetToolCall().GetArgumentsJson(), p.GetToolCall().GetId())
		case p.GetToolResult() != nil:
			fmt.Fprintf(w, "← [%s] %s\n", p.GetToolResult().GetToolCallId(), p.GetToolResult().GetContent())
		}
	}
	fmt.Fprintln(w)
}

func (c *cli) printJSON(m proto.Message) error {
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(c.out, string(b))
	return err
}

// FromUsage turns the API's usage into what the bar draws.
func FromUsage(u *contextdv1.ContextUsage) Breakdown {
	th := u.GetThresholds()
	return Breakdown{
		Model: u.GetModel(), Window: u.GetContextWindow(), System: u.GetSystemTokens(), Tools: u.GetToolsTokens(),
		Messages: u.GetMessagesTokens(), Reserved: u.GetReservedOutputTokens(), Used: u.GetUsedTokens(),
		Free: u.GetFreeTokens(), Over: u.GetOverTokens(), PercentUsed: u.GetPercentUsed(),
		Level:         strings.TrimPrefix(u.GetLevel().String(), "CONTEXT_LEVEL_"),
		Source:        strings.ToLower(strings.TrimPrefix(u.GetEstimateSource().String(), "ESTIMATE_SOURCE_")),
		ExpectedError: u.GetExpectedError(), Warning: th.GetWarningThreshold(), Critical: th.GetCriticalThreshold(),
		Emergency: th.GetEmergencyThreshold(),
	}
}
