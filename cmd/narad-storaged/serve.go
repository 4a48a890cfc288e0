package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/narad-io/storage/datadir"
	"github.com/narad-io/storage/server"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// runServe starts the node and serves it until SIGTERM or SIGINT.
func runServe(args []string, stderr io.Writer) int {
	cfg, err := parseServeFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "narad-storaged:", err)
		return 2
	}
	logger, err := newLogger(cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "narad-storaged:", err)
		return 2
	}
	defer logger.Sync()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	cfg.Logger = logger
	if err := serve(ctx, cfg.Config); err != nil {
		if errors.Is(err, datadir.ErrLocked) || errors.Is(err, datadir.ErrIdentity) {
			// Another daemon serves this data directory, or it is another
			// node's: a usage error, said plainly (exit 2), not a crash.
			logger.Error("narad-storaged refused to start", zap.Error(err))
			fmt.Fprintln(stderr, "narad-storaged:", err)
			return 2
		}
		logger.Error("narad-storaged stopped", zap.Error(err))
		return 1
	}
	return 0
}

func newLogger(cfg config, stderr io.Writer) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(cfg.LogLevel)
	if err != nil {
		return nil, err
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	var encoder zapcore.Encoder
	switch cfg.LogFormat {
	case "json":
		encoder = zapcore.NewJSONEncoder(enc)
	case "console":
		encoder = zapcore.NewConsoleEncoder(enc)
	default:
		return nil, fmt.Errorf("log-format %q: want json or console", cfg.LogFormat)
	}
	return zap.New(zapcore.NewCore(encoder, zapcore.AddSync(stderr), level)), nil
}

// serve runs the node until ctx ends, then stops it gracefully
// (server.Close), telling systemd when it is ready and when it stops.
func serve(ctx context.Context, cfg server.Config) error {
	logger := cfg.Logger
	s, err := server.New(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return nil // stopped while waiting for etcd
		}
		return err
	}
	addr := ""
	if a := s.Addr(); a != nil {
		addr = a.String()
	}
	logger.Info("narad-storaged starting", zap.String("version", version), zap.String("data_dir", cfg.DataDir),
		zap.String("addr", addr), zap.String("codec", cfg.Codec))
	stopReloads := reloadOnHangup(s)
	defer stopReloads()
	err = s.Start(ctx)
	if err == nil {
		if err := sdNotify("READY=1"); err != nil {
			logger.Warn("systemd notification", zap.Error(err))
		}
		select {
		case <-ctx.Done():
		case err = <-s.Failed():
		}
	}
	if ctx.Err() != nil && (err == nil || errors.Is(err, ctx.Err())) {
		err = nil
		logger.Info("shutting down")
	}
	if nerr := sdNotify("STOPPING=1"); nerr != nil {
		logger.Warn("systemd notification", zap.Error(nerr))
	}
	return errors.Join(err, s.Close())
}

// reloadOnHangup reloads the TLS certificate (if TLS is on) at each
// SIGHUP until the returned stop; a SIGHUP never stops the daemon.
func reloadOnHangup(s *server.Server) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-hup:
				s.ReloadTLS()
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
		<-finished
	}
}
