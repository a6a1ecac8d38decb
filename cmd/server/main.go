// Command contextd is the contextd gRPC server. Configuration comes from
// CONTEXTD_* environment variables and the flags of the same names; run
// `contextd --help` for the list, `contextd --version` for the build. `contextd migrate` applies the database
// migrations and exits. `contextd tokenizer import -encoding NAME
// tokenizer.json` converts a model's tokenizer.json into
// CONTEXTD_TOKENIZERS_DIR (or -dir) for the exact counting of a family whose
// vocabulary is not embedded.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/tokens"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "contextd:", err)
		os.Exit(1)
	}
}

func run() error {
	args := os.Args[1:]
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version" || args[0] == "version") {
		fmt.Println(app.Version())
		return nil
	}
	if len(args) > 0 && args[0] == "tokenizer" {
		if len(args) < 2 || args[1] != "import" {
			return errors.New("tokenizer: the subcommand is import (contextd tokenizer import --help)")
		}
		return importTokenizer(args[2:])
	}
	migrateOnly := len(args) > 0 && args[0] == "migrate"
	if migrateOnly {
		args = args[1:]
	}
	cfg, err := app.ParseConfig(args, app.LookupEnv)
	if errors.Is(err, flag.ErrHelp) {
		app.WriteHelp(os.Stdout, app.LookupEnv)
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w (contextd --help lists the flags and subcommands)", err)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if migrateOnly {
		// `contextd migrate`: apply pending migrations and exit (a Kubernetes
		// Job before a rollout). The server also migrates at start.
		st, err := app.OpenStore(ctx, cfg, log)
		if err != nil {
			return err
		}
		log.Info("migrations applied")
		return st.Close()
	}
	return app.Run(ctx, cfg, log)
}

// importTokenizer is `contextd tokenizer import`.
func importTokenizer(args []string) error {
	fs := flag.NewFlagSet("contextd tokenizer import", flag.ContinueOnError)
	encoding := fs.String("encoding", tokens.Llama3, "encoding the tokenizer.json is for: "+strings.Join(tokens.ImportableEncodings(), ", "))
	dir := fs.String("dir", os.Getenv(tokens.VocabDirEnv), "directory to write the converted vocabulary into (default $"+tokens.VocabDirEnv+")")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: contextd tokenizer import [-encoding llama3] [-dir DIR] path/to/tokenizer.json")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("tokenizer import: give exactly one tokenizer.json")
	}
	if *dir == "" {
		return fmt.Errorf("tokenizer import: set -dir or %s", tokens.VocabDirEnv)
	}
	path, err := tokens.ImportFile(*encoding, fs.Arg(0), *dir)
	if err != nil {
		return fmt.Errorf("tokenizer import: %w", err)
	}
	fmt.Printf("wrote %s; serve with %s=%s\n", path, tokens.VocabDirEnv, *dir)
	return nil
}
