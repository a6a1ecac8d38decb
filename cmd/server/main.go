// Command contextd is the contextd gRPC server. Configuration comes from
// CONTEXTD_* environment variables and the flags of the same names; run
// `contextd --help` for the list. `contextd migrate` applies the database
// migrations and exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/contextd/contextd/internal/app"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "contextd:", err)
		os.Exit(1)
	}
}

func run() error {
	args := os.Args[1:]
	migrateOnly := len(args) > 0 && args[0] == "migrate"
	if migrateOnly {
		args = args[1:]
	}
	cfg, err := app.ParseConfig(args, app.LookupEnv)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
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
