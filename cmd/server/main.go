// Command contextd is the contextd gRPC server. Configuration comes from
// CONTEXTD_* environment variables and the flags of the same names; run
// `contextd --help` for the list.
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
	cfg, err := app.ParseConfig(os.Args[1:], app.LookupEnv)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return app.Run(ctx, cfg, log)
}
