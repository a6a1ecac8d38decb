package contextctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"google.golang.org/protobuf/types/known/fieldmaskpb"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// update sends an UpdateSession naming only the fields whose flags were
// given.
func (c *cli) update(ctx context.Context, fs *flag.FlagSet, id, system, systemFile, labels string, expected int64, term terminal, asJSON bool) error {
	req := &contextdv1.UpdateSessionRequest{SessionId: id, UpdateMask: &fieldmaskpb.FieldMask{}}
	var err error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "model":
			req.Model = f.Value.String()
			req.UpdateMask.Paths = append(req.UpdateMask.Paths, "model")
		case "system":
			req.SystemPrompt = system
			req.UpdateMask.Paths = append(req.UpdateMask.Paths, "system_prompt")
		case "system-file":
			b, e := os.ReadFile(systemFile)
			err = errors.Join(err, e)
			req.SystemPrompt = string(b)
			req.UpdateMask.Paths = append(req.UpdateMask.Paths, "system_prompt")
		case "labels":
			var e error
			req.Labels, e = parseLabels(labels)
			err = errors.Join(err, e)
			req.UpdateMask.Paths = append(req.UpdateMask.Paths, "labels")
		}
	})
	if err != nil {
		return err
	}
	if len(req.UpdateMask.Paths) == 0 {
		return usageError{"update takes at least one of --model, --system, --system-file, --labels"}
	}
	if expected >= 0 {
		req.ExpectedVersion = &expected
	}
	resp, err := c.client.UpdateSession(ctx, req)
	if err != nil {
		return err
	}
	if asJSON {
		return c.printJSON(resp)
	}
	s := resp.GetSession()
	fmt.Fprintf(c.out, "updated %s (%s); version %d, model %s\n", id, strings.Join(req.UpdateMask.Paths, ", "), s.GetVersion(), s.GetModel())
	fmt.Fprint(c.out, Render(FromUsage(s.GetUsage()), term.width, term.color))
	return nil
}
